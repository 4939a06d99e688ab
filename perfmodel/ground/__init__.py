"""The ground under every module: files perfmodel reads (table formats) and writes (atomic, owned folders),
where its shipped data lies, and the one progress bar.
"""
