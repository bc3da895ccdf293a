"""Settings for the whole test run."""

import os
import signal

# Every JVM the tests start (the Spark session, `siftbus pipeline` subprocesses, a
# standalone cluster's daemons) compiles with C1 only and collects with the serial
# collector: short test jobs never repay C2's compilations or G1's threads (CPU of the
# Spark tests about 0.6x, measured side by side). Set in the environment, so a user's own
# choice wins and the subprocesses inherit it.
_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
os.environ.setdefault("SPARK_SUBMIT_OPTS", _JVM)
os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", _JVM)

# A run started in the background of a shell (`make test &`) inherits SIGINT ignored, and
# so would every command the tests start and then interrupt as Ctrl-C does (they would
# not stop): the default back, which the commands they start inherit.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
