"""Every error a user can act on, in one hierarchy: the command line prints one as a line and exits 2.

Each message is one line that names what went wrong and, where it helps, what to do about it. An
error that is not a KvlintError is a bug in kvlint and is reported as an internal error.
"""


class KvlintError(Exception):
    """Bad configuration, an unknown rule, a release that cannot be fetched, no tree to scan, …"""


class ConfigError(KvlintError):
    """`[tool.kvlint]` or the file holding it is unreadable, malformed or names an unknown key."""


class RegistryError(KvlintError):
    """An unknown rule selector, or rule modules that disagree with their file names."""


class TargetError(KvlintError):
    """No tree to scan: no path given and none found, or a path that is not (in) a vLLM tree."""


class ReleaseError(KvlintError):
    """A vLLM release cannot be fetched from PyPI or unpacked."""


class PackageIndexError(ReleaseError):
    """The package index (PEP 691) cannot be read, or its answer is malformed or over a limit."""


class ArchiveError(ReleaseError):
    """An archive that is unreadable, unsafe or over a limit; the message is one line."""


class FixError(KvlintError):
    """A one-line reason a file was left untouched by `kvlint fix`."""


class ReviewError(KvlintError):
    """A one-line reason the review cannot be made (bad ref, not a git checkout, …)."""


class GitHubError(KvlintError):
    """One line saying what went wrong talking to GitHub; never holds the token."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status  # the HTTP status GitHub answered, when it answered one


class VerifyError(KvlintError):
    """`kvlint verify` could not produce a matrix; the message is one line for stderr."""


class UnreadableSource(KvlintError):
    """A file's bytes are not Python source; a one-line cause, e.g. 'contains NUL bytes'."""
