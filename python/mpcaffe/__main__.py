"""`python -m mpcaffe <command> ...`: the mpcaffe command line (mpcaffe --help lists commands);
`classify` is BVLC's python/classify.py, run here in Python (mpcaffe._classify_command)."""

import sys

if sys.argv[1:2] == ["classify"]:
    from ._classify_command import main as classify
    sys.exit(classify(sys.argv[2:]))

from ._command import main

main()
