// tools/main.cc — the `mpcaffe` program: the command line of tools/mpcaffe.cc.
#include "tools/command.h"

int main(int argc, char** argv) { return mpcaffe::tools::RunCommandLine(argc, argv); }
