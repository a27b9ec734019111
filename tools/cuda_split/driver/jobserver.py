"""GNU make's jobserver: a client for nvcc-split's executor, and a small server.

`make -jN` hands its N job slots down to the commands it runs through `MAKEFLAGS`:

    --jobserver-auth=fifo:PATH   make >= 4.4: a named pipe
    --jobserver-auth=R,W         make 4.2-4.3 (and 4.4 with --jobserver-style=pipe):
                                 the two ends of a pipe, inherited as file descriptors
    --jobserver-fds=R,W          make <= 4.1, the same

The pipe holds N-1 one-byte tokens. Every process make starts owns one implicit slot (its
own); each further job it runs at the same time must hold a token read from the pipe, and
write that byte back when the job ends. Make passes the descriptors only to recipes it
knows to be recursive (a `+` prefix, or `$(MAKE)` in the line): for others `MAKEFLAGS`
still names them but they are closed, or are by then other files. `from_environ` checks
them and returns None when they are not a usable jobserver (the caller then falls back
to its own `-j`).

Reads never block (the fifo, or the pipe reopened through /proc, is opened
`O_NONBLOCK`: the pipe's shared file description, which make and its other children use,
is left as it is), so the executor can wait for a token and for its running steps at once
(`fileno()` for `poll`). Tokens are written back as the steps end, whatever the outcome.
`Server` is the other side (make's), for the benchmarks and tests.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping

_AUTH_PREFIXES = ("--jobserver-auth=", "--jobserver-fds=")


def auth_of(makeflags: str) -> str:
    """The jobserver's address in MAKEFLAGS (the last one given, as make reads it), or ""."""
    found = ""
    for word in makeflags.split():
        for prefix in _AUTH_PREFIXES:
            if word.startswith(prefix):
                found = word[len(prefix) :]
    return found


class JobserverError(Exception):
    """MAKEFLAGS names a jobserver that cannot be used."""


class Jobserver:
    """A jobserver client: `try_acquire` a token without blocking, `release` it later."""

    def __init__(self, read_fd: int, write_fd: int, auth: str, owned: tuple[int, ...]):
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.auth = auth
        self.broken = ""  # why the jobserver stopped working ("" while it works)
        self._owned = owned  # descriptors this client opened (closed by close())
        self._held: list[bytes] = []
        self._lock = threading.Lock()

    def fileno(self) -> int:
        """Readable when a token may be there (for poll/select)."""
        return self.read_fd

    @property
    def held(self) -> int:
        with self._lock:
            return len(self._held)

    def try_acquire(self) -> bytes | None:
        """A token, or None if there is none now (or the jobserver broke: see `broken`)."""
        if self.broken:
            return None
        # SIGINT waits until the byte read is recorded: a KeyboardInterrupt between the
        # read and the bookkeeping would lose the token for the rest of make's run.
        with _sigint_deferred():
            try:
                token = os.read(self.read_fd, 1)
            except (BlockingIOError, InterruptedError):
                return None
            except OSError as e:
                self.broken = f"reading a token failed: {e}"
                return None
            if not token:
                self.broken = "the jobserver's pipe was closed"
                return None
            with self._lock:
                self._held.append(token)
        return token

    def release(self, token: bytes) -> None:
        """Write a token back (the byte that was read: make gives some a meaning). Only
        tokens held are written: after `release_all` a late release writes nothing, so
        the jobserver never gets more tokens than it gave."""
        with _sigint_deferred():  # not between the bookkeeping and the write
            with self._lock:
                if token not in self._held:
                    return
                self._held.remove(token)
            try:
                os.write(self.write_fd, token)
            except OSError as e:  # make is gone: nobody is left to give it to
                self.broken = self.broken or f"writing a token back failed: {e}"

    def release_all(self) -> None:
        """Write back every token still held (a safety net: the executor releases each)."""
        while True:
            with self._lock:
                if not self._held:
                    return
                token = self._held[-1]
            self.release(token)

    def close(self) -> None:
        self.release_all()
        for fd in self._owned:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._owned = ()


@contextlib.contextmanager
def _sigint_deferred() -> Iterator[None]:
    """KeyboardInterrupt waits for the end of the block (in the main thread, the only one
    Python raises it in). Blocking the signal would not do: the kernel hands SIGINT to any
    thread that does not block it (a worker's), and Python then raises it in the main
    thread at its next bytecode; `_thread.interrupt_main` bypasses the mask too. So the
    Python handler is swapped for one that notes the signal, and the old one runs after."""
    # Not in other threads (signal.signal is main-thread only), nor where a handler set
    # outside Python (getsignal() None) could not be put back.
    if threading.current_thread() is not threading.main_thread() or (
        signal.getsignal(signal.SIGINT) is None
    ):
        yield
        return
    caught: list[int] = []
    old = signal.signal(signal.SIGINT, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
        if caught:
            if callable(old):
                old(signal.SIGINT, None)
            elif old == signal.SIG_DFL:
                signal.raise_signal(signal.SIGINT)


def from_environ(
    environ: Mapping[str, str] | None = None, warn: Callable[[str], None] | None = None
) -> Jobserver | None:
    """The jobserver MAKEFLAGS names, or None: none named, or not usable (then `warn` is
    told why, once). Call it early, before the process opens files of its own: a
    descriptor make closed may be reused by one of them."""
    env = os.environ if environ is None else environ
    auth = auth_of(env.get("MAKEFLAGS", ""))
    if not auth:
        return None
    try:
        return connect(auth)
    except JobserverError as e:
        if warn is not None:
            warn(f"MAKEFLAGS names the jobserver {auth!r}, but {e}")
        return None


def connect(auth: str) -> Jobserver:
    """A client of the jobserver `auth` (`fifo:PATH` or `R,W`). Raises JobserverError."""
    if auth.startswith("fifo:"):
        path = auth[len("fifo:") :]
        try:
            fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as e:
            raise JobserverError(f"its fifo cannot be opened: {e}") from e
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.close(fd)
            raise JobserverError(f"{path} is not a fifo")
        return Jobserver(fd, fd, auth, (fd,))
    r_text, sep, w_text = auth.partition(",")
    if not (sep and r_text.isdigit() and w_text.isdigit()):
        raise JobserverError("it is neither fifo:PATH nor R,W")
    r, w = int(r_text), int(w_text)
    hint = "(is the recipe a recursive one, with '+' or $(MAKE)? make -n?)"
    try:
        st_r, st_w = os.fstat(r), os.fstat(w)
        mode_r = fcntl.fcntl(r, fcntl.F_GETFL) & os.O_ACCMODE
        mode_w = fcntl.fcntl(w, fcntl.F_GETFL) & os.O_ACCMODE
    except OSError as e:
        raise JobserverError(f"its descriptors are not open {hint}: {e}") from e
    if not (stat.S_ISFIFO(st_r.st_mode) and stat.S_ISFIFO(st_w.st_mode)):
        raise JobserverError(f"descriptors {r},{w} are not a pipe {hint}")
    if (st_r.st_dev, st_r.st_ino) != (st_w.st_dev, st_w.st_ino):
        raise JobserverError(f"descriptors {r},{w} are not the two ends of one pipe {hint}")
    if mode_r == os.O_WRONLY or mode_w == os.O_RDONLY:
        raise JobserverError(f"descriptors {r},{w} are open the wrong way {hint}")
    # A file description of our own, to read without blocking: O_NONBLOCK on the
    # inherited one would change it for make and every other job too.
    try:
        own = os.open(f"/proc/self/fd/{r}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise JobserverError(f"its pipe cannot be reopened through /proc: {e}") from e
    return Jobserver(own, w, auth, (own,))


class Server:
    """make's side: a fifo holding `tokens` tokens (make -jN holds N-1), in a private
    directory. `makeflags(jobs)` is what make would put in its children's MAKEFLAGS."""

    def __init__(self, tokens: int, token: bytes = b"+"):
        self.tokens = tokens
        self.dir = tempfile.mkdtemp(prefix="cuda-split-jobserver-")
        self.path = os.path.join(self.dir, "fifo")
        os.mkfifo(self.path, 0o600)
        self.fd = os.open(self.path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        os.write(self.fd, token * tokens)

    @property
    def auth(self) -> str:
        return f"fifo:{self.path}"

    def makeflags(self, jobs: int) -> str:
        return f"-j{jobs} --jobserver-auth={self.auth}"

    def available(self) -> int:
        """The tokens in the fifo now (read out and written back: call it while no
        client is running, e.g. to check that all came back)."""
        data = b""
        while True:
            try:
                chunk = os.read(self.fd, 4096)
            except BlockingIOError:
                break
            if not chunk:
                break
            data += chunk
        if data:
            os.write(self.fd, data)
        return len(data)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        with contextlib.suppress(OSError):
            os.rmdir(self.dir)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
