"""`python -m mpcaffe <command> ...`: the mpcaffe command line (mpcaffe --help lists commands).

The commands that build nets from a prototxt (train, test, time, calibrate) run in this
interpreter, as BVLC's caffe tool built WITH_PYTHON_LAYER does, so nets with Python layers run;
their modules are imported as pycaffe imports them (sys.path: the working directory, PYTHONPATH).
The other commands run the package's mpcaffe program. `classify` is BVLC's python/classify.py,
run here in Python (mpcaffe._classify_command)."""

import signal
import sys

IN_PROCESS = {"train", "test", "time", "calibrate"}

if sys.argv[1:2] == ["classify"]:
    from ._classify_command import main as classify
    sys.exit(classify(sys.argv[2:]))

if sys.argv[1:2] and sys.argv[1] in IN_PROCESS:
    if "" not in sys.path:
        sys.path.insert(0, "")  # a layer module in the working directory, as `caffe` finds it
    # Ctrl-C stops the command as it stops the program (Python's handler would wait for it).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    from ._mpcaffe import run_command
    sys.exit(run_command(sys.argv[1:]))

from ._command import main

main()
