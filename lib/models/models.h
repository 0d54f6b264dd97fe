// The models room in one include: the Model interface and the tasks' losses, BasicNet and its
// fused pooling, the MLP, the small ResNet, and the registry that builds them by name.
#pragma once

#include "lib/models/basic_net.h"
#include "lib/models/fused_pool.h"
#include "lib/models/mlp.h"
#include "lib/models/model.h"
#include "lib/models/registry.h"
#include "lib/models/resnet.h"
