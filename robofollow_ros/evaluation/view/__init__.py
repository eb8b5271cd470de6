"""``robofollow view``: a static run browser (docs/reports.md, "The run browser").

``runs`` reads run directories and each trial (``timeline``: its stage timeline from the recording),
``page_data`` computes every number the page shows (the ``report`` statistics), ``site`` writes the folder;
``assets/`` holds the page, its script and its style (package data).
"""
