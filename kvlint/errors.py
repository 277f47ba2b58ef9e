"""The one base class of errors a user can act on: the command line prints them as one line and exits 2."""


class KvlintError(Exception):
    """Bad configuration, an unknown rule, a release that cannot be fetched, no tree to scan, …"""
