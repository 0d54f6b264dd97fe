// (stub: being written)
#pragma once
