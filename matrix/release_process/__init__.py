"""``python -m matrix releases`` (docs/releases.md): the vLLM releases the package index serves
beside the ones the matrix knows (``listing``, over ``index``), and a new release's pins and
tox envs written from the newest known release's, installed and probed (``add``, over
``pins`` and ``tox_blocks``); ``command`` is the command line. No vLLM here: the probe of
vLLM's surfaces runs in the release's env (``matrix.adapters.surface_probe``).
"""
