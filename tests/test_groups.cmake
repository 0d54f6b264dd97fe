# Which CTest tests the GoogleTest tests make, with their labels and timeouts (read by
# tests/discover_groups.cmake after each build of a test binary). Each row: a regular expression
# over "Suite.Test", the labels ("|" between them), the timeout in seconds, and SUITE (the row's
# tests of one suite run in one process, a CTest test named after the suite) or EACH (a process,
# and a CTest test, per test). The first row that matches a test takes it; a test no row matches
# stops the build.
#
# Labels: what a test needs and does.
#   unit       in-process, within the test binary
#   e2e        starts the real programs (trainer, the examples, the workers)
#   reference  compares with a Python reference run (PyTorch, Transformers, PEFT, TensorBoard)
#   multinode  several nodes in network namespaces (root)
#   package    the installed CMake package built into an outside project (.ci/run only)
#   sanitize   run by scripts/sanitize under ASan + UBSan as well
# Left out of the sanitizer phase (no `sanitize` label), as their code runs there through shorter
# tests: the end-to-end runs that train on the real data set again (TrainedRun, Bf16, torchrun);
# the ten kill -9 trials, whose save and resume paths the other Resume tests run; the fine-tuning
# parity runs against Transformers and PEFT (HfFineTuneFolders, HfModels, Lora and LoraRuns run
# that code); the loss curve against a run that logs every step (the other LossCurve tests); DDP's
# accumulation under no_sync (the other Ddp tests run the same Reducer); the sharding runs against
# DDP, its resharded resumes and kill -9 trials (Sharding's state and killed-rank tests run the
# sharded forward, backward and optimizer); the multi-node runs but the killed node (whose timing
# bounds assume full speed; the Launcher tests run the rendezvous on loopback).
#
# Timeouts are for the sanitizer build, about four times slower than the release build: a hung
# test costs its timeout, not CI's limit.
set(TRAINER_TEST_GROUPS
  # --- End-to-end tests kept out of the sanitizer phase, each a process of its own.
  "^TrainerCli\\.(Bf16TrainsOnCpu|TorchrunStarts)"          "e2e"                    300 EACH
  "^Resume\\.KillNine"                                      "e2e"                    600 EACH
  "^LossCurve\\.EveryStepAtTheDefaultLoggingSteps"          "e2e"                    300 EACH
  "^Ddp\\.AccumulationUnderNoSync"                          "e2e"                    300 EACH
  "^Sharding\\.(ACheckpoint|KillNine|ADeepSpeedConfigTrains)" "e2e"                    300 EACH
  "^Multinode\\.(TwoNodes|ALinkTaken|SaveOnEachNode|AnElastic|GlooSocketIfname)"
                                                            "e2e|multinode"          300 EACH
  "^TrainedRun\\."                                          "e2e"                    300 SUITE
  "^(Models/HfFineTune(OneProcess)?|Keys/HfFineTuneKeys)\\." "e2e|reference"          600 EACH
  "^(Processes/SftAgainstTrl|SftRun)\\."                    "e2e|reference"          900 EACH
  "^(Processes/DpoAgainstTrl|DpoRun)\\."                    "e2e|reference"          900 EACH
  "^Adapters/LoraRun\\."                                    "e2e|reference"          600 EACH
  "^Models/ShardingModels\\."                               "e2e"                    600 EACH
  "^Package\\."                                             "package"                600 SUITE
  # --- Run under the sanitizers too.
  "^Multinode\\."                                           "e2e|multinode|sanitize" 600 SUITE
  "^(HfFineTuneFolders|HfGenerate|LoraRuns|TokenizeCli|ChatCli|ReportTo|LossCurve)\\."
                                                            "e2e|reference|sanitize" 900 SUITE
  "^(IrisCli|TorchScriptCli|TrainerCli)\\."                 "e2e|reference|sanitize" 900 SUITE
  "^(BadInput|Resume|Sharding|Ddp|Launcher|TrainerPlot|Examples|Generate|GptRun)\\."
                                                            "e2e|sanitize"           900 SUITE
  "^(Accelerate|AccelerateData|AccelerateLaunch|AccelerateTrainer|Checkpoint)\\."
                                                            "e2e|sanitize"           600 SUITE
  "^(Plot|StepCurve|Docs|FusedAdamW|Registry|Tasks)\\."     "e2e|sanitize"           300 SUITE
  "^(MemoryMetrics|AutoFindBatchSize|DataLoading)\\."      "e2e|sanitize"           300 SUITE
  "^(Jinja|Language/JinjaRenders)\\."                         "unit|sanitize"          300 SUITE
  "^(Tokenizer|LmFiles|LengthGroupedAgainstTransformers|Gpt|HfModels|Lora|TorchScript|ChatTemplate|Sft[A-Za-z]*|Dpo[A-Za-z]*)\\."
                                                            "unit|reference|sanitize" 600 SUITE
  "^(Cases/LoraAgainstPeft|Models/HfLogits|Optimizers)\\."  "unit|reference|sanitize" 600 SUITE
  "^SchedulesReference\\."                                   "unit|reference|sanitize" 300 SUITE
  "^(Cuda|DeviceLoader)\\."                                 "unit|sanitize"          300 SUITE
  "."                                                       "unit|sanitize"          300 SUITE
)
