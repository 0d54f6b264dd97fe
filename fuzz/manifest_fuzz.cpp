// libFuzzer target for checkpoint manifests (parse_manifest in trainer/checkpoint_manifest.cpp):
// only trainer::InputError may come out, and a manifest that was accepted must read back the same
// from its own manifest.json (Manifest::to_json, dumped as a checkpoint writes it).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "lib/base/errors.h"
#include "trainer/checkpoint_manifest.h"

namespace {

bool same(const trainer::Manifest& a, const trainer::Manifest& b) {
  if (a.global_step != b.global_step || a.model_name != b.model_name ||
      a.world_size != b.world_size || a.total_batch_size != b.total_batch_size ||
      a.save_only_model != b.save_only_model || a.files.size() != b.files.size()) {
    return false;
  }
  for (size_t i = 0; i < a.files.size(); ++i) {
    const auto& x = a.files[i];
    const auto& y = b.files[i];
    if (x.name != y.name || x.size != y.size || x.crc32 != y.crc32) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  trainer::Manifest manifest;
  try {
    manifest = trainer::parse_manifest(text, "fuzz");
  } catch (const trainer::InputError&) {
    return 0;
  }
  // What verify_checkpoint looks up in an accepted manifest (world_size is at most 65536).
  for (const std::string& name : trainer::required_checkpoint_files(manifest)) {
    manifest.find(name);
  }
  // What a checkpoint writes (base::write_json) must read back: an InputError here is a finding.
  std::string json = manifest.to_json().dump(2) + "\n";
  trainer::Manifest again = trainer::parse_manifest(json, "fuzz round trip");
  if (!same(manifest, again)) {
    std::fprintf(stderr, "manifest.json changed on a round trip:\n%s\n%s\n", json.c_str(),
                 again.to_json().dump(2).c_str());
    abort();
  }
  return 0;
}
