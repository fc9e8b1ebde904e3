"""Running a cell on the real scheduler: the reservation ``variants`` (and a user's own,
``user_variants``), one run's ``playback``, a case's events played on it (``play_events``), a
run at one pool size (``pools``), the case's ``fit``, and a cell's pool sweep (``cell``); what
they produce is plain data (``records``) that ``matrix.judge`` reads. vLLM is reached only
through an adapter.
"""
