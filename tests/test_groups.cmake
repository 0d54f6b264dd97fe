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
# The sanitizer phase (label `sanitize`) runs the in-process suites (unit, and the e2e ones whose
# tests call our code in the test process), BadInput's rows (the program run in-process there:
# tests/program_in_process.h), and of the suites that start processes only those whose code no
# in-process test reaches: the launcher (fork, signals, the rendezvous on loopback: Launcher,
# AccelerateLaunch), DDP's Reducer and the sharded strategies across processes (Ddp, Sharding's
# state and killed-rank tests). Left out, as their code runs under the sanitizers in-process: the
# runs of the `trainer` program (the commands over the models, data, tokenizers and Trainer the
# unit suites call; the program's own set-up and dispatch by BadInput's rows), the kill -9 and
# resume trials (Checkpoint's tests save and load in-process), the parity runs against
# Transformers, PEFT and TRL, the sharding runs against DDP and their resharded resumes, the
# multi-node runs (the Launcher tests run the rendezvous), and BadInput's tests of a process's
# life (the lock, a full disk, signals, a closed stdout, a killed launcher).
#
# Timeouts are for the sanitizer build, about four times slower than the release build: a hung
# test costs its timeout, not CI's limit. Every test takes under 60 s in the release build on a
# warm machine (scripts/ci-time lists the longest); a suite that would not is a process per test.
set(TRAINER_TEST_GROUPS
  # --- Tests that start processes, each a process of its own, left out of the sanitizer phase.
  "^TrainerCli\\.(Bf16TrainsOnCpu|TorchrunStarts)"          "e2e"                    300 EACH
  "^Resume\\.KillNine"                                      "e2e"                    600 EACH
  "^LossCurve\\.EveryStepAtTheDefaultLoggingSteps"          "e2e"                    300 EACH
  "^Ddp\\.AccumulationUnderNoSync"                          "e2e"                    300 EACH
  "^Sharding\\.(ACheckpoint|KillNine|ADeepSpeedConfigTrains)" "e2e"                    300 EACH
  "^Multinode\\."                                           "e2e|multinode"          300 EACH
  "^TrainedRun\\."                                          "e2e"                    300 SUITE
  "^(Models/HfFineTune(OneProcess)?|Keys/HfFineTuneKeys|Families/FamilyFineTune|Families/MoeFineTuneTwoProcesses)\\." "e2e|reference"          600 EACH
  "^(Processes/SftAgainstTrl|SftRun)\\."                    "e2e|reference"          900 EACH
  "^(Processes/DpoAgainstTrl|DpoRun)\\."                    "e2e|reference"          900 EACH
  "^(Processes/GrpoAgainstTrl|GrpoRun|RlooRun)\\."          "e2e|reference"          900 EACH
  "^(Processes/RewardAgainstTrl|RewardRun)\\."              "e2e|reference"          600 EACH
  "^(Cases/SeqClsAgainstTransformers|SeqClsRun)\\."         "e2e|reference"          600 EACH
  "^Adapters/LoraRun\\."                                    "e2e|reference"          600 EACH
  "^Models/ShardingModels\\."                               "e2e"                    600 EACH
  "^BadInput\\.(ARunWhose|AnEarlierRun|AJsonlLog|AFullDisk|OneRunAtATime|Sigint|AClosedStdout|ALauncherKilled)"
                                                            "e2e"                    300 EACH
  "^Package\\."                                             "package"                600 SUITE
  # The committed Python results and their check (scripts/reference): shell, no code of ours.
  "^(References|ReferenceCheck)\\."                         "unit"                   300 SUITE
  "^(HfFineTuneFolders|HfGenerate|FamilyLora|LoraRuns|TokenizeCli|ChatCli|ReportTo|LossCurve)\\."
                                                            "e2e|reference"          600 SUITE
  "^(IrisCli|TorchScriptCli|TrainerCli)\\."                 "e2e|reference"          600 SUITE
  "^(Resume|TrainerPlot|Examples|Generate|GptRun)\\."       "e2e"                    600 SUITE
  # --- Run under the sanitizers too.
  "^BadInput\\."                                            "e2e|sanitize"           600 EACH
  "^(Sharding|Ddp|Launcher)\\."                             "e2e|sanitize"           900 SUITE
  "^(Accelerate|AccelerateData|AccelerateLaunch|AccelerateTrainer|Checkpoint)\\."
                                                            "e2e|sanitize"           600 SUITE
  "^(Plot|StepCurve|Docs|FusedAdamW|Registry|Tasks)\\."     "e2e|sanitize"           300 SUITE
  "^(MemoryMetrics|AutoFindBatchSize|DataLoading)\\."      "e2e|sanitize"           300 SUITE
  "^(Jinja|JinjaDifferential|Language/JinjaRenders)\\."       "unit|sanitize"          300 SUITE
  "^(Tokenizer|LmFiles|LengthGroupedAgainstTransformers|Gpt|HfModels|Sampling|HfFamilies|Lora|TorchScript|ChatTemplate|Sft[A-Za-z]*|Dpo[A-Za-z]*|GrpoRewards|GrpoMathAnswer|RewardProgram|RewardModel)\\."
                                                            "unit|reference|sanitize" 600 SUITE
  "^(Cases/LoraAgainstPeft|Models/HfLogits|Families/HfFamily|Hub/HubCheckpoint|SeqCls/SequenceClassifier|SequenceClassifiers|Optimizers)\\."  "unit|reference|sanitize" 600 SUITE
  "^SchedulesReference\\."                                   "unit|reference|sanitize" 300 SUITE
  "^(Cuda|DeviceLoader)\\."                                 "unit|sanitize"          300 SUITE
  "."                                                       "unit|sanitize"          300 SUITE
)
