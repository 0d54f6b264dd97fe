// (stub: being written)
#include "lib/data/lm_files.h"
