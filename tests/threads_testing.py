"""Running a test's body on several threads at once, its failures reported on the test's own."""
import threading


def run_on_threads(body, n: int) -> None:
    """Run ``body(k)`` for k in range(n), each on a thread of its own, all at once; once every
    thread has ended, raise the first exception one of them raised."""
    errors = []

    def guarded(k):
        try:
            body(k)
        except BaseException as err:        # re-raised below, on the test's thread
            errors.append(err)
    threads = [threading.Thread(target=guarded, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
