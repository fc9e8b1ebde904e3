"""``python -m matrix explore``: Hypothesis draws scenarios no one wrote a case for
(``strategies``), each is tried on the real scheduler and judged like a cell (``trials``), and
the ``search`` shrinks each distinct failure and writes it as a case file.
"""
