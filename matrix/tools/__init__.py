"""Commands beside the matrix itself: ``bench`` (speed figures), ``show_layout`` (a model's
derived groups), ``validate`` (case and model files checked without running them), ``envsize``
(the envs' size on disk), ``devsource`` (your own vLLM as an env's), ``record_architectures``
and ``bisect/``. The CI templates' player is ``matrix.ci``.
"""
