// TorchScript modules as Models: loading, the mirror of the module's hierarchy that registers its
// tensors under PyTorch's names, forward with one-line errors, and saving back.
#include "lib/models/torchscript.h"

#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include <caffe2/serialize/inline_container.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <torch/script.h>

#include "lib/base/errors.h"
#include "lib/base/files.h"
#include "lib/base/json_fields.h"
#include "lib/base/text.h"

namespace trainer::models {
namespace {

// The line of a TorchScript error that says what went wrong: the interpreter's message starts
// with "The following operation failed in the TorchScript interpreter." and a traceback, and
// ends with the Python exception ("RuntimeError: mat1 and mat2 shapes cannot be multiplied ...").
std::string script_error(const std::string& message) {
  std::vector<std::string> lines;
  std::istringstream in(message);
  for (std::string line; std::getline(in, line);) {
    size_t begin = line.find_first_not_of(" \t");
    if (begin != std::string::npos) lines.push_back(line.substr(begin));
  }
  if (lines.empty()) return "unknown error";
  if (lines.front().rfind("The following operation failed in the TorchScript interpreter", 0) ==
      0) {
    return lines.back();
  }
  return lines.front();  // an error of the operator itself, its backtrace after the first line
}

// The child module `prefix` ("body.0") of `root`, created with its parents on first use.
torch::nn::Module& mirror(torch::nn::Module& root, const std::vector<std::string>& path,
                          size_t depth,
                          std::map<std::string, std::shared_ptr<torch::nn::Module>>& made) {
  torch::nn::Module* node = &root;
  std::string prefix;
  for (size_t i = 0; i < depth; ++i) {
    prefix += (i ? "." : "") + path[i];
    auto it = made.find(prefix);
    if (it == made.end()) {
      auto child = std::make_shared<torch::nn::Module>(path[i]);
      node->register_module(path[i], child);
      it = made.emplace(prefix, child).first;
    }
    node = it->second.get();
  }
  return *node;
}

std::vector<std::string> split_name(const std::string& name) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (true) {
    size_t dot = name.find('.', begin);
    parts.push_back(name.substr(begin, dot - begin));
    if (dot == std::string::npos) return parts;
    begin = dot + 1;
  }
}

// Why a file torch::jit::load refused is no TorchScript archive, in our words rather than the
// zip reader's ("failed finding central directory"): not a zip at all, or a torch.save file (a
// zip with data.pkl but no TorchScript code). "" for a TorchScript-shaped archive.
std::string archive_problem(const std::string& path) {
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    if (!reader.hasRecord("constants.pkl") && reader.hasRecord("data.pkl")) {
      return "it is a torch.save file (a state_dict or a pickled module), which only Python can "
             "load";
    }
    return "";
  } catch (const std::exception&) {
    return "it is not an archive as torch.jit.save writes";
  }
}

}  // namespace

TorchScriptModel::TorchScriptModel(const std::string& path, Task task) : path_(path) {
  task_ = task;
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    throw InputError(
        fmt::format("model_name_or_path {}: {} (a TorchScript file written by "
                    "torch.jit.script(model).save(path))",
                    path, std::strerror(errno)));
  }
  if (!S_ISREG(info.st_mode)) {
    throw InputError(fmt::format("model_name_or_path {} is {}, not a TorchScript file", path,
                                 S_ISDIR(info.st_mode) ? "a directory" : "not a regular file"));
  }
  try {
    module_ = std::make_unique<torch::jit::Module>(torch::jit::load(path, torch::kCPU));
  } catch (const std::exception& e) {  // c10::Error, or the unpickler's own errors
    const c10::Error* error = dynamic_cast<const c10::Error*>(&e);
    const std::string what = archive_problem(path);
    throw InputError(fmt::format(
        "model_name_or_path {} is not a TorchScript archive: {}; write one with "
        "torch.jit.script(model).save(path)",
        path,
        !what.empty() ? what
                      : base::first_line(error ? error->what_without_backtrace() : e.what())));
  }
  if (!module_->find_method("forward")) {
    throw InputError(
        fmt::format("model_name_or_path {}: the TorchScript module has no forward "
                    "method",
                    path));
  }
  std::map<std::string, std::shared_ptr<torch::nn::Module>> made;
  // A tensor reached under two names (tied weights) is registered under the first only, so that
  // optimizers update it once.
  std::set<const c10::TensorImpl*> seen;
  for (const auto& item : module_->named_parameters(/*recurse=*/true)) {
    if (!seen.insert(item.value.unsafeGetTensorImpl()).second) continue;
    std::vector<std::string> parts = split_name(item.name);
    mirror(*this, parts, parts.size() - 1, made)
        .register_parameter(parts.back(), item.value, item.value.requires_grad());
  }
  for (const auto& item : module_->named_buffers(/*recurse=*/true)) {
    if (!seen.insert(item.value.unsafeGetTensorImpl()).second) continue;
    std::vector<std::string> parts = split_name(item.name);
    mirror(*this, parts, parts.size() - 1, made).register_buffer(parts.back(), item.value);
  }
  if (parameters().empty()) {
    throw InputError(fmt::format(
        "model_name_or_path {}: the TorchScript module has no parameters to train", path));
  }
  train(module_->is_training());
}

TorchScriptModel::~TorchScriptModel() = default;

c10::IValue TorchScriptModel::call(std::vector<c10::IValue> args,
                                   const std::unordered_map<std::string, c10::IValue>& kwargs,
                                   const std::string& what) {
  try {
    return module_->forward(std::move(args), kwargs);
  } catch (const c10::OutOfMemoryError&) {
    throw;
  } catch (const InputError&) {
    throw;
  } catch (const c10::Error& e) {
    throw InputError(fmt::format("{}: forward failed on {}: {}", path_, what,
                                 script_error(e.what_without_backtrace())));
  } catch (const std::runtime_error& e) {  // torch::jit::JITException: a `raise` in the module
    throw InputError(
        fmt::format("{}: forward failed on {}: {}", path_, what, script_error(e.what())));
  }
}

torch::Tensor TorchScriptModel::forward(const torch::Tensor& x) {
  c10::IValue output = call({x}, {}, "x " + tensor_text(x));
  if (!output.isTensor()) {
    throw InputError(
        fmt::format("{}: forward returned a {}, not a tensor", path_, output.tagKind()));
  }
  return output.toTensor();
}

ModelOutput TorchScriptModel::forward(const data::Batch& inputs) {
  const auto& parameters = module_->get_method("forward").function().getSchema().arguments();
  bool by_name = false;  // parameters[0] is self
  for (size_t i = 1; i < parameters.size(); ++i) {
    by_name = by_name || inputs.contains(parameters[i].name());
  }
  std::string what;
  const std::string held = fmt::format("{}", fmt::join(inputs.keys(), ", "));
  if (!by_name) {
    if (!inputs.contains("x")) {
      throw InputError(fmt::format(
          "{}: forward's parameters name none of the batch's tensors ({}), and it holds no \"x\" "
          "to pass alone (name the parameters after the batch's keys)",
          path_, held));
    }
    return {forward(inputs.at("x")), {}};
  }
  std::unordered_map<std::string, c10::IValue> kwargs;
  for (size_t i = 1; i < parameters.size(); ++i) {
    const std::string& name = parameters[i].name();
    if (inputs.contains(name)) {
      kwargs[name] = inputs.at(name);
      what += fmt::format("{}{} {}", what.empty() ? "" : ", ", name, tensor_text(inputs.at(name)));
    } else if (name == "num_items_in_batch" && inputs.num_items_in_batch.defined()) {
      kwargs[name] = inputs.num_items_in_batch;
    } else if (!parameters[i].default_value()) {
      throw InputError(fmt::format(
          "{}: forward takes '{}', which the batch does not hold (it holds {}; give the parameter "
          "a default to do without it)",
          path_, name, held));
    }
  }
  c10::IValue output = call({}, kwargs, what);
  ModelOutput result;
  if (output.isTensor()) {
    result.logits = output.toTensor();
  } else if (output.isGenericDict()) {
    auto dict = output.toGenericDict();
    for (const char* key : {"logits", "loss"}) {
      if (!dict.contains(key)) continue;
      const c10::IValue& value = dict.at(key);
      if (!value.isTensor()) {
        throw InputError(
            fmt::format("{}: forward returned a dict whose \"{}\" is a {}, not a tensor", path_,
                        key, value.tagKind()));
      }
      (std::string(key) == "logits" ? result.logits : result.loss) = value.toTensor();
    }
    if (!result.logits.defined()) {
      throw InputError(fmt::format("{}: forward returned a dict without \"logits\"", path_));
    }
  } else if (output.isTuple()) {
    const auto& items = output.toTupleRef().elements();
    const size_t first = kwargs.count("labels") && items.size() >= 2 ? 1 : 0;
    for (size_t i = 0; i <= first && i < items.size(); ++i) {
      if (!items[i].isTensor()) {
        throw InputError(
            fmt::format("{}: forward returned a tuple whose item {} is a {}, not a tensor", path_,
                        i, items[i].tagKind()));
      }
    }
    if (items.empty()) throw InputError(fmt::format("{}: forward returned an empty tuple", path_));
    result.logits = items[first].toTensor();
    if (first == 1) result.loss = items[0].toTensor();
  } else {
    throw InputError(
        fmt::format("{}: forward returned a {}, not a tensor, a dict with \"logits\" or a tuple",
                    path_, output.tagKind()));
  }
  return result;
}

void TorchScriptModel::train(bool on) {
  torch::nn::Module::train(on);
  module_->train(on);
}

void TorchScriptModel::to(torch::Dtype dtype, bool non_blocking) {
  // set_data on the shared TensorImpl: the script module's slots see the new data too.
  for (const auto& list : {parameters(), buffers()}) {
    for (torch::Tensor t : list) {
      if (t.is_floating_point()) t.set_data(t.to(dtype, non_blocking));
    }
  }
}

void TorchScriptModel::to(torch::Device device, torch::Dtype dtype, bool non_blocking) {
  for (const auto& list : {parameters(), buffers()}) {
    for (torch::Tensor t : list) {
      t.set_data(t.to(device, t.is_floating_point() ? dtype : t.scalar_type(), non_blocking));
    }
  }
}

void TorchScriptModel::save(const std::string& path, base::WriteBatch* batch) const {
  std::ostringstream out;
  bool on_cpu = true;
  for (const auto& p : module_->parameters()) on_cpu = on_cpu && p.device().is_cpu();
  for (const auto& b : module_->buffers()) on_cpu = on_cpu && b.device().is_cpu();
  if (on_cpu) {
    module_->save(out);
  } else {
    torch::jit::Module copy = module_->clone();
    copy.to(torch::kCPU);
    copy.save(out);
  }
  base::write_file_atomic(path, out.str(), batch);
}

std::shared_ptr<Model> load_torchscript(const std::string& path,
                                        const nlohmann::ordered_json& config,
                                        const data::DataInfo& info) {
  auto options = base::JsonFields::options("model_config", "a TorchScript model", config);
  std::string outputs = options.choice("outputs", "logits", {"logits", "log_probs"});
  options.finish();
  if (outputs == "log_probs" && info.task != data::TaskKind::kClassification) {
    throw InputError(fmt::format(
        "model_config outputs \"log_probs\" is for classification; the data set's task is {}",
        data::task_name(info.task)));
  }
  return std::make_shared<TorchScriptModel>(path, Task{info.task, outputs == "log_probs"});
}

}  // namespace trainer::models
