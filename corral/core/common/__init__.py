"""Common: the shared types every other room reads, importing none of them.

Sample batches (:mod:`.sample_batch`), spaces and the observation preprocessor
(:mod:`.spaces`), import paths (:mod:`.import_paths`), the codecs that put
arrays, spaces and a script's own objects into JSON state (:mod:`.state_codec`,
:mod:`.space_codec`, :mod:`.by_value`) and the checks on numbers read back
from a checkpoint (:mod:`.restored`). They sit at the bottom so that the
rooms above can share them without importing each other.
"""
