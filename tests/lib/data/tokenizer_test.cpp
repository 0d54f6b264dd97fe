// (stub: being written)
#include <gtest/gtest.h>
