// Everything a C++ program of its own needs from this project, in one include: the Trainer and
// its arguments and callbacks, the Accelerator and its launcher, DDP and process groups, the
// models, the data sets and loaders, the optimizers, safetensors. With the installed package:
//   find_package(Trainer REQUIRED)  and  target_link_libraries(app PRIVATE trainer::trainer)
#pragma once

#include "lib/accelerate/accelerator.h"
#include "lib/accelerate/launch.h"
#include "lib/base/errors.h"
#include "lib/data/dataloader.h"
#include "lib/data/mnist.h"
#include "lib/distributed/ddp.h"
#include "lib/distributed/process_group.h"
#include "lib/io/safetensors.h"
#include "lib/models/models.h"
#include "lib/optim/adafactor.h"
#include "lib/optim/adamw.h"
#include "lib/optim/optimizers.h"
#include "trainer/callbacks.h"
#include "trainer/trainer.h"
#include "trainer/training_args.h"
