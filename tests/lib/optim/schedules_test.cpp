// Transformers' learning-rate schedules and torch's ReduceLROnPlateau: turning points by hand,
// and every step of tests/reference/scripts/schedules_reference.py's runs of Transformers' own
// schedulers (each lr_scheduler_type with several lr_scheduler_kwargs), and its refusals.
#include "lib/optim/schedules.h"

#include <cmath>
#include <fstream>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/base/errors.h"
#include "lib/optim/plateau.h"
#include "tests/test_util.h"

namespace trainer::optim {
namespace schedules_test {

using json = nlohmann::ordered_json;

double at(const std::string& type, int64_t step, int64_t warmup, int64_t total,
          const json& kwargs = json::object(), double lr = 1e-3) {
  return LrSchedule(type, kwargs, warmup, total, lr)(step);
}

TEST(LrSchedule, TransformersMultipliers) {
  EXPECT_DOUBLE_EQ(at("linear", 0, 10, 100), 0.0);
  EXPECT_DOUBLE_EQ(at("linear", 5, 10, 100), 0.5);
  EXPECT_DOUBLE_EQ(at("linear", 10, 10, 100), 1.0);
  EXPECT_DOUBLE_EQ(at("linear", 55, 10, 100), 0.5);
  EXPECT_DOUBLE_EQ(at("linear", 100, 10, 100), 0.0);
  EXPECT_DOUBLE_EQ(at("linear", 0, 0, 938), 1.0);
  EXPECT_NEAR(at("cosine", 55, 10, 100), 0.5, 1e-12);
  EXPECT_NEAR(at("cosine", 100, 10, 100), 0.0, 1e-12);
  EXPECT_DOUBLE_EQ(at("constant", 0, 10, 100), 1.0);
  EXPECT_DOUBLE_EQ(at("constant_with_warmup", 2, 10, 100), 0.2);
  EXPECT_DOUBLE_EQ(at("constant_with_warmup", 50, 10, 100), 1.0);
  // polynomial's lr_end is absolute: past the end lr_end / lr.
  EXPECT_DOUBLE_EQ(at("polynomial", 101, 0, 100, {{"lr_end", 1e-4}}, 1e-3), 0.1);
  EXPECT_DOUBLE_EQ(at("inverse_sqrt", 40, 10, 100), 0.5);  // 1 / sqrt(40 / 10)
  EXPECT_DOUBLE_EQ(
      at("warmup_stable_decay", 200, 0, 100, {{"num_decay_steps", 10}, {"min_lr_ratio", 0.25}}),
      0.25);
}

TEST(LrSchedule, KwargsRefusedByName) {
  testing::expect_input_error(
      [] {
        check_lr_scheduler_kwargs("cosine", {{"power", 2}}, 1e-3);
      },
      {"lr_scheduler_kwargs: power is not an option of lr_scheduler_type cosine",
       "its options: num_cycles"});
  testing::expect_input_error(
      [] {
        check_lr_scheduler_kwargs("linear", {{"num_cycles", 2}}, 1e-3);
      },
      {"num_cycles is not an option of lr_scheduler_type linear (it takes none)"});
  testing::expect_input_error(
      [] {
        check_lr_scheduler_kwargs("polynomial", {{"lr_end", 0.01}}, 1e-3);
      },
      {"lr_end 0.01 is not allowed with lr_scheduler_type polynomial",
       "smaller than the initial learning rate 0.001"});
  testing::expect_input_error(
      [] {
        check_lr_scheduler_kwargs("cosine", {{"num_cycles", "two"}}, 1e-3);
      },
      {"num_cycles \"two\" is not allowed", "a finite number"});
  testing::expect_input_error(
      [] {
        check_lr_scheduler_kwargs("reduce_lr_on_plateau", {{"factor", 2}}, 1e-3);
      },
      {"factor 2 is not allowed with lr_scheduler_type reduce_lr_on_plateau (must be < 1.0)"});
  testing::expect_input_error(
      [] { check_lr_scheduler_kwargs("warmup_stable_decay", json::object(), 1e-3); },
      {"warmup_stable_decay needs num_decay_steps"});
  testing::expect_input_error(
      [] {
        check_lr_scheduler_kwargs("warmup_stable_decay", {{"num_decay_steps", -3}}, 1e-3);
      },
      {"argument lr_scheduler_kwargs: num_decay_steps -3.0 is not allowed with lr_scheduler_type "
       "warmup_stable_decay (a number of steps >= 0)"});
  testing::expect_input_error(
      [] {
        check_lr_scheduler_kwargs("warmup_stable_decay",
                                  {{"num_decay_steps", 3}, {"num_stable_steps", -1}}, 1e-3);
      },
      {"num_stable_steps -1.0 is not allowed with lr_scheduler_type warmup_stable_decay (a "
       "number of steps >= 0, or null)"});
  testing::expect_input_error(
      [] {
        Plateau(parse_plateau_options({{"min_lr", {1e-4}}}), 2);
      },
      {"min_lr lists 1 rates; the optimizer has 2 parameter groups"});
  EXPECT_NO_THROW(check_lr_scheduler_kwargs("constant", {{"num_cycles", 3}}, 1e-3));
}

const json& reference() {
  static const json ref = [] {
    const std::string dir = testing::reference_dir("schedules");
    if (dir.empty()) return json();
    std::ifstream in(dir + "/schedules.json");
    return json::parse(in);
  }();
  return ref;
}

bool close(double ours, double theirs) {
  return std::abs(ours - theirs) <= 1e-12 * std::max(std::abs(theirs), 1e-300) ||
         (ours == 0 && theirs == 0);
}

TEST(SchedulesReference, EveryStepEqualsTransformers) {
  const json& ref = reference();
  ASSERT_FALSE(ref.is_null());
  ASSERT_GE(ref["schedules"].size(), 50u);
  std::set<std::string> types;
  for (const json& c : ref["schedules"]) {
    const std::string type = c["type"];
    types.insert(type);
    const double lr = c["lr"];
    const LrSchedule schedule(type, c["kwargs"], c["warmup"], c["total"], lr);
    const json& lrs = c["lrs"];
    for (size_t s = 0; s < lrs.size(); ++s) {
      const double theirs = lrs[s];
      const double ours = lr * schedule(static_cast<int64_t>(s));
      ASSERT_TRUE(close(ours, theirs))
          << type << " " << c["kwargs"].dump() << " warmup " << c["warmup"] << " total "
          << c["total"] << " step " << s << ": ours " << ours << ", Transformers' " << theirs;
    }
  }
  // Every type but reduce_lr_on_plateau (PlateauReference) has cases.
  EXPECT_EQ(types.size() + 1, lr_scheduler_types().size());
}

TEST(SchedulesReference, PlateauEqualsTorch) {
  const json& ref = reference();
  ASSERT_FALSE(ref.is_null());
  ASSERT_GE(ref["plateaus"].size(), 5u);
  for (const json& c : ref["plateaus"]) {
    const size_t groups = c["groups"];
    Plateau plateau(parse_plateau_options(c["kwargs"]), groups);
    std::vector<double> lrs(groups, c["lr"].get<double>());
    for (size_t k = 0; k < c["metrics"].size(); ++k) {
      const json& m = c["metrics"][k];
      plateau.step(m.is_null() ? std::nan("") : m.get<double>(), lrs);
      const std::string where = c["kwargs"].dump() + " step " + std::to_string(k);
      for (size_t g = 0; g < groups; ++g) {
        ASSERT_TRUE(close(lrs[g], c["lrs"][k][g]))
            << where << " group " << g << ": ours " << lrs[g] << ", torch's " << c["lrs"][k][g];
      }
      const json& s = c["states"][k];
      const PlateauState& st = plateau.state();
      if (s[0].is_null()) {
        EXPECT_TRUE(std::isinf(st.best)) << where;
      } else {
        EXPECT_DOUBLE_EQ(st.best, s[0].get<double>()) << where;
      }
      EXPECT_EQ(st.num_bad_epochs, s[1].get<int64_t>()) << where;
      EXPECT_DOUBLE_EQ(st.cooldown_counter, s[2].get<double>()) << where;
      EXPECT_EQ(st.last_epoch, s[3].get<int64_t>()) << where;
    }
  }
}

TEST(SchedulesReference, RefusedWhereTransformersFails) {
  const json& ref = reference();
  ASSERT_FALSE(ref.is_null());
  ASSERT_GE(ref["errors"].size(), 15u);
  for (const json& c : ref["errors"]) {
    ASSERT_TRUE(c["error"].is_string()) << c.dump();  // Transformers did fail on it
    const std::string type = c["type"];
    EXPECT_THROW(
        {
          if (type == kReduceLrOnPlateau) {
            check_lr_scheduler_kwargs(type, c["kwargs"], c["lr"]);
          } else {
            LrSchedule(type, c["kwargs"], c["warmup"], c["total"], c["lr"]);
          }
        },
        InputError)
        << c.dump();
  }
}

}  // namespace schedules_test
}  // namespace trainer::optim
