"""Judging what ran, from plain records alone: how each run ended (``runs``), a cell's verdict
against the case's fit (``verdict``), its over-reservation (``tightness``), and the result
record the tables and reports show (``result``). Pure: no vLLM, no pytest.
"""
