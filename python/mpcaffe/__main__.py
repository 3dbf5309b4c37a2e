"""`python -m mpcaffe <command> ...`: the mpcaffe command line (mpcaffe --help lists commands)."""

from ._command import main

main()
