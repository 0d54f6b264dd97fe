// The tree's one UTF-8 validator (lib/base/utf8.h): well-formed sequences as Unicode defines them,
// ill-formed subparts replaced as Python's errors="replace" does, code points out and in; and the
// SHA-256 of lib/base/sha256.h against FIPS 180-4's examples.
#include "lib/base/utf8.h"

#include <string>

#include <gtest/gtest.h>

#include "lib/base/sha256.h"

namespace trainer::base {
namespace utf8_test {

TEST(Utf8, InvalidUtf8IsReplacedAsPythonDoes) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(replace_invalid_utf8("ok \xC3\xA9"), "ok \xC3\xA9");
  EXPECT_EQ(replace_invalid_utf8("\xED\xA0\x80"), r + r + r);  // a surrogate: three subparts
  EXPECT_EQ(replace_invalid_utf8("\xF0\x9F\x98"), r);          // a cut emoji: one
  EXPECT_EQ(replace_invalid_utf8("\xC0\xAF"), r + r);          // overlong
  EXPECT_EQ(replace_invalid_utf8("\xF4\x90\x80\x80"), r + r + r + r);
  EXPECT_EQ(replace_invalid_utf8("a\xE2\x82z"), "a" + r + "z");
  EXPECT_EQ(replace_invalid_utf8("12345678\x80"), "12345678" + r);  // past the 8-byte ASCII step
}

TEST(Utf8, TheFirstInvalidByteIsFoundWhereverItIs) {
  EXPECT_EQ(first_invalid_utf8(""), std::string::npos);
  EXPECT_EQ(first_invalid_utf8("h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80"), std::string::npos);
  EXPECT_EQ(first_invalid_utf8("abcdefghij\xC3"), 10u);  // cut at the end
  EXPECT_EQ(first_invalid_utf8("\xE0\x80\xAF"), 0u);     // overlong '/'
  EXPECT_EQ(first_invalid_utf8("ab\x80"), 2u);           // a lone continuation byte
  EXPECT_EQ(utf8_sequence_length("\xF0\x9F\x98\x80", 0), 4u);
  EXPECT_EQ(utf8_sequence_length("\xF0\x9F\x98", 0), 0u);
  EXPECT_EQ(utf8_at("\xF0\x9F\x98", 0).length, 3u);  // the maximal subpart
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));
}

TEST(Utf8, CodePointsGoOutAndBackUnchanged) {
  for (char32_t c : {U'a', U'\u00E9', U'\u20AC', U'\U0001F600', U'\U0010FFFF', U'\u0080'}) {
    std::string text;
    append_utf8(text, c);
    EXPECT_TRUE(is_valid_utf8(text));
    size_t length = 0;
    EXPECT_EQ(decode_utf8(text, 0, length), c);
    EXPECT_EQ(length, text.size());
  }
}

TEST(Sha256, MatchesTheStandardsExamples) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

}  // namespace utf8_test
}  // namespace trainer::base
