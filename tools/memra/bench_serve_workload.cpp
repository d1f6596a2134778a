// `memra bench-serve`'s workload: prompt and output lengths (fixed or uniform), synthetic text of
// common English words (about one token each; the count is scaled by the tokens per word the
// server's /tokenize measured), a shared system prompt, multi-turn sessions, JSONL datasets of
// real conversations, and the request bodies for /v1/completions and /v1/chat/completions.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>

#include "bench_serve.h"
#include "cli_args.h"
#include "core/error.h"

namespace memra::cli::bench_serve {

using nlohmann::json;

int32_t LengthSpec::sample(std::mt19937_64& rng) const {
  if (lo == hi) return lo;
  return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
}

std::string LengthSpec::text() const {
  return lo == hi ? std::to_string(lo) : "uniform:" + std::to_string(lo) + "-" + std::to_string(hi);
}

LengthSpec parse_length(const std::string& flag, const std::string& text) {
  constexpr int32_t kMax = 1 << 20;
  const std::string uniform = "uniform:";
  if (text.rfind(uniform, 0) != 0) {
    const int32_t v = parse_int(flag, text, 1, kMax);
    return {v, v};
  }
  const std::string range = text.substr(uniform.size());
  const size_t dash = range.find('-');
  if (dash == std::string::npos)
    fail(ErrorCode::invalid_argument, "{} expects N or uniform:A-B, got '{}'", flag, text);
  LengthSpec s{parse_int(flag, range.substr(0, dash), 1, kMax),
               parse_int(flag, range.substr(dash + 1), 1, kMax)};
  if (s.lo > s.hi) fail(ErrorCode::invalid_argument, "{} {}: A must be <= B", flag, text);
  return s;
}

namespace {

constexpr const char* kWords[] = {
    "the",     "of",     "and",     "to",      "in",     "is",      "was",    "for",    "on",
    "that",    "with",   "as",      "by",      "at",     "from",    "his",    "an",     "were",
    "are",     "which",  "this",    "be",      "have",   "had",     "one",    "not",    "but",
    "all",     "they",   "their",   "there",   "been",   "has",     "when",   "who",    "will",
    "more",    "no",     "if",      "out",     "so",     "up",      "said",   "what",   "its",
    "about",   "than",   "into",    "them",    "can",    "only",    "other",  "new",    "some",
    "could",   "time",   "these",   "two",     "may",    "first",   "then",   "do",     "any",
    "like",    "my",     "now",     "over",    "such",   "our",     "man",    "me",     "even",
    "most",    "made",   "after",   "also",    "did",    "many",    "before", "must",   "through",
    "back",    "years",  "where",   "much",    "your",   "way",     "well",   "down",   "should",
    "because", "each",   "just",    "those",   "people", "how",     "too",    "little", "state",
    "good",    "very",   "make",    "world",   "still",  "own",     "see",    "men",    "work",
    "long",    "get",    "here",    "between", "both",   "life",    "being",  "under",  "never",
    "day",     "same",   "another", "know",    "while",  "last",    "might",  "us",     "great",
    "old",     "year",   "off",     "come",    "since",  "against", "go",     "came",   "right",
    "used",    "take",   "three",   "river",   "garden", "window",  "market", "silver", "engine",
    "winter",  "harbor", "letter",  "mountain"};
constexpr size_t kNumWords = sizeof(kWords) / sizeof(kWords[0]);

// Words for about `tokens` tokens.
int32_t words_for(const WorkloadOptions& o, int32_t tokens) {
  return std::max<int32_t>(1, int32_t(std::lround(tokens / std::max(o.tokens_per_word, 0.05))));
}

std::string content_text(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string out;
  if (content.is_array())
    for (const json& part : content)
      if (part.is_object() && part.value("type", "") == "text" && part.contains("text") &&
          part["text"].is_string()) {
        if (!out.empty()) out += '\n';
        out += part["text"].get<std::string>();
      }
  return out;
}

// One JSONL line as a conversation; empty when it has no user message.
Conversation parse_conversation(const json& j) {
  Conversation c;
  if (j.contains("messages") && j["messages"].is_array()) {
    for (const json& m : j["messages"])
      if (m.is_object() && m.contains("role") && m["role"].is_string())
        c.push_back({m["role"].get<std::string>(), content_text(m.value("content", json()))});
  } else if (j.contains("conversations") && j["conversations"].is_array()) {
    for (const json& m : j["conversations"]) {
      if (!m.is_object() || !m.contains("value") || !m["value"].is_string()) continue;
      const std::string from = m.value("from", "");
      const std::string role = from == "human" || from == "user" ? "user"
                               : from == "system"                ? "system"
                                                                 : "assistant";
      c.push_back({role, m["value"].get<std::string>()});
    }
  }
  const bool has_user =
      std::any_of(c.begin(), c.end(), [](const Message& m) { return m.role == "user"; });
  return has_user ? c : Conversation{};
}

}  // namespace

std::string words(std::mt19937_64& rng, int32_t n) {
  std::string out;
  for (int32_t i = 0; i < n; ++i) {
    if (i) out += ' ';
    out += kWords[rng() % kNumWords];
  }
  return out;
}

std::vector<Conversation> load_dataset(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(ErrorCode::not_found, "--dataset {}: cannot open", path);
  constexpr size_t kMaxLines = 10'000'000;
  std::vector<Conversation> out;
  std::string line;
  size_t line_no = 0;
  while (line_no < kMaxLines && std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object())
      fail(ErrorCode::invalid_argument, "--dataset {}: line {} is not a JSON object", path,
           line_no);
    Conversation c = parse_conversation(j);
    if (!c.empty()) out.push_back(std::move(c));
  }
  if (out.empty())
    fail(ErrorCode::invalid_argument,
         "--dataset {}: no line has a conversation with a user message ({{\"messages\": "
         "[{{\"role\": \"user\", \"content\": ...}}]}})",
         path);
  return out;
}

SessionPlan plan_session(const WorkloadOptions& o, uint64_t index) {
  // Every session draws from its own stream, so its plan does not depend on the order in which
  // the clients picked sessions up.
  std::mt19937_64 rng(o.seed * 0x9E3779B97F4A7C15ull + index + 1);
  SessionPlan p;
  if (o.shared_prefix > 0) {
    std::mt19937_64 shared(o.seed + 0x5eed);
    p.head.push_back({"system", words(shared, words_for(o, o.shared_prefix))});
  }
  if (o.dataset != nullptr) {
    const Conversation& c = (*o.dataset)[index % o.dataset->size()];
    // One turn: the conversation up to its last user message, history included. Several: its
    // user messages in order, the server's own replies in between.
    const auto last_user =
        std::find_if(c.rbegin(), c.rend(), [](const Message& m) { return m.role == "user"; });
    if (o.turns == 1) {
      p.head.insert(p.head.end(), c.begin(), last_user.base() - 1);
      p.users.push_back(last_user->content);
    } else {
      for (const Message& m : c) {
        if (m.role == "system" && p.users.empty()) p.head.push_back(m);
        if (m.role == "user" && int32_t(p.users.size()) < o.turns) p.users.push_back(m.content);
      }
    }
  } else {
    for (int32_t t = 0; t < o.turns; ++t)
      p.users.push_back(words(rng, words_for(o, o.prompt.sample(rng))));
  }
  for (size_t t = 0; t < p.users.size(); ++t) p.max_tokens.push_back(o.output.sample(rng));
  return p;
}

std::string request_body(const WorkloadOptions& o, const Conversation& messages,
                         int32_t max_tokens) {
  json body = {{"max_tokens", max_tokens},
               {"temperature", 0},
               {"ignore_eos", true},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (!o.model.empty()) body["model"] = o.model;
  if (o.endpoint == "chat") {
    json msgs = json::array();
    for (const Message& m : messages) msgs.push_back({{"role", m.role}, {"content", m.content}});
    body["messages"] = std::move(msgs);
  } else {
    std::string prompt;
    for (const Message& m : messages) prompt += m.role + ": " + m.content + "\n";
    body["prompt"] = prompt + "assistant:";
  }
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace memra::cli::bench_serve
