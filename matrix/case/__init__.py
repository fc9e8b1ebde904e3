"""The case format: what a YAML case file may say, read safely with line numbers, validated,
and expanded over its matrix axes into cells (a case under one variant). No vLLM here.

``strict`` (the base of every model) -> ``engine``, ``events``, ``model`` (model
descriptions), ``limits`` -> ``parts`` -> ``format`` (``CaseFile``); ``reading`` (a file's
YAML) -> ``loading`` (validated, errors at their line) -> ``expansion`` (axes x variants);
``shipped`` says where the shipped cases are.
"""
