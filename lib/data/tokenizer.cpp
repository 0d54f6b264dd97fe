// (stub: being written)
#include "lib/data/tokenizer.h"
