"""Reporting results: ``tables`` from result records, the report's ``sections``, the Markdown
and JSON ``files``; across releases, the envs' reports loaded (``release_reports``), the
``fidelity`` checks and the ``crossversion`` report. Pure: no vLLM.
"""
