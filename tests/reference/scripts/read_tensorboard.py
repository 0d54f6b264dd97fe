"""Reads a TensorBoard log directory with TensorBoard's own reader (EventAccumulator, from PyPI's
`tensorboard`) and prints what it holds as JSON, so the C++ tests can compare it with the run's
log_history. Each event file is first read record by record with TensorBoard's TFRecord reader,
which checks both CRC-32Cs of every record (EventAccumulator stops silently at a bad one).

usage: read_tensorboard.py LOGDIR
prints: {"files": [names], "records": {name: count}, "file_versions": [..],
         "scalars": {tag: [[step, value, wall_time], ...]}, "texts": {tag: [[step, text], ...]}}
"""
import json
import os
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.tensorflow_stub import errors, pywrap_tensorflow


def read_records(path):
    """Every record of one event file; raises DataLossError on a bad length or CRC."""
    reader = pywrap_tensorflow.PyRecordReader_New(path)
    records = []
    while True:
        try:
            reader.GetNext()
        except errors.OutOfRangeError:
            return records
        records.append(reader.record())


def main():
    logdir = sys.argv[1]
    files = sorted(f for f in os.listdir(logdir) if "tfevents" in f)
    records, versions = {}, []
    for name in files:
        events = [event_pb2.Event.FromString(r) for r in read_records(os.path.join(logdir, name))]
        records[name] = len(events)
        versions.append(events[0].file_version if events else "")
    accumulator = EventAccumulator(logdir, size_guidance={"scalars": 0, "tensors": 0})
    accumulator.Reload()
    tags = accumulator.Tags()
    scalars = {tag: [[e.step, e.value, e.wall_time] for e in accumulator.Scalars(tag)]
               for tag in tags["scalars"]}
    texts = {tag: [[e.step, e.tensor_proto.string_val[0].decode()] for e in accumulator.Tensors(tag)]
             for tag in tags["tensors"]}
    print(json.dumps({"files": files, "records": records, "file_versions": versions,
                      "scalars": scalars, "texts": texts}))


if __name__ == "__main__":
    main()
