"""The findings of docs/findings.md as what goes to vLLM (``python -m matrix finding``,
``tox -e patched034``; docs/findings.md).

Reading order: ``doc`` (docs/findings.md read back: each finding's section and its labelled
paragraphs, and a finding's patch with its test; pure), ``measured`` (the environment and the
pools measured, in vLLM's words), ``issue`` (a finding as the body a vLLM maintainer reads: an
issue, a pull request's description, or a comment on the thread it belongs to), ``tree`` (a
release's source archive with the findings' patches applied, installed as the env's vLLM) and
``compare`` (stock on that tree against ``proposed`` on the release, from the two envs' JSON
reports). It reads the reports ``report`` writes and the archives ``upstream`` fetches; nothing
there imports it.
"""
