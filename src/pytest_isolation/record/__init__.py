"""The record of what each test file executed, for the selector's
``recorded`` scope: what a process ran (:mod:`.executed`), what the parent
ran outside the files' processes (:mod:`.parentrun`), each source file's
functions and fingerprints (:mod:`.sourcefacts`), and the record kept in
pytest's cache and the run report (:mod:`.store`, kept by :mod:`.recording`).

A file-mode child imports :mod:`.executed` only: it stays light.
"""
