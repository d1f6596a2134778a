// The host-side rules of graph-replayed decode steps (models/step_layout.h), which need no GPU:
// the batch and context buckets, which steps are pure decodes, and the padding layout (dummy
// tokens in the scratch block, block tables restrided, logit rows after the real ones).
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "models/step_layout.h"

namespace memra {
namespace {

using V = std::vector<int32_t>;

TEST(GraphBuckets, BatchBucketsEndAtTheEnginesLimit) {
  EXPECT_EQ(graph_batch_buckets(64), (V{1, 2, 4, 8, 16, 24, 32, 48, 64}));
  EXPECT_EQ(graph_batch_buckets(7), (V{1, 2, 4, 7}));
  EXPECT_EQ(graph_batch_buckets(1), (V{1}));
  EXPECT_EQ(graph_batch_buckets(100), (V{1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 100}));
  EXPECT_EQ(graph_batch_buckets(256), (V{1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256}));
  EXPECT_TRUE(graph_batch_buckets(0).empty());
  // small: each size up to 8 its own bucket, and 12, the rest as before.
  const BucketGrain small = BucketGrain::small, fine = BucketGrain::fine;
  EXPECT_EQ(graph_batch_buckets(64, small), (V{1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 48, 64}));
  EXPECT_EQ(graph_batch_buckets(7, small), (V{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(graph_batch_buckets(9, small), (V{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(graph_batch_buckets(12, small), (V{1, 2, 3, 4, 5, 6, 7, 8, 12}));
  EXPECT_EQ(graph_batch_buckets(13, small), (V{1, 2, 3, 4, 5, 6, 7, 8, 12, 13}));
  EXPECT_EQ(graph_batch_bucket(graph_batch_buckets(64, small), 5), 5);
  EXPECT_EQ(graph_batch_bucket(graph_batch_buckets(64, small), 9), 12);
  EXPECT_EQ(graph_batch_bucket(graph_batch_buckets(64, small), 13), 16);
  // fine: every size to 16, every fourth to 32, every eighth to 64, then as before.
  EXPECT_EQ(graph_batch_buckets(64, fine), (V{1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12,
                                              13, 14, 15, 16, 20, 24, 28, 32, 40, 48, 56, 64}));
  EXPECT_EQ(graph_batch_buckets(7, fine), (V{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(graph_batch_buckets(18, fine),
            (V{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18}));
  const V fine256 = graph_batch_buckets(256, fine);
  EXPECT_EQ(V(fine256.begin() + 20, fine256.end()), (V{40, 48, 56, 64, 96, 128, 192, 256}));
  EXPECT_EQ(graph_batch_buckets(100, fine).back(), 100);
  EXPECT_EQ(graph_batch_buckets(100, fine).end()[-2], 96);
  EXPECT_EQ(graph_batch_bucket(graph_batch_buckets(64, fine), 17), 20);
  EXPECT_EQ(graph_batch_bucket(graph_batch_buckets(64, fine), 33), 40);
  const V b = graph_batch_buckets(64);
  EXPECT_EQ(graph_batch_bucket(b, 1), 1);
  EXPECT_EQ(graph_batch_bucket(b, 3), 4);
  EXPECT_EQ(graph_batch_bucket(b, 17), 24);
  EXPECT_EQ(graph_batch_bucket(b, 64), 64);
  EXPECT_EQ(graph_batch_bucket(b, 65), 0);
}

TEST(GraphBuckets, ContextBucketIsAPowerOfTwoFrom4096CappedByTheContext) {
  EXPECT_EQ(graph_context_bucket(1, 8192), 4096);
  EXPECT_EQ(graph_context_bucket(4096, 8192), 4096);
  EXPECT_EQ(graph_context_bucket(4097, 8192), 8192);
  EXPECT_EQ(graph_context_bucket(5000, 6000), 6000);
  EXPECT_EQ(graph_context_bucket(20000, 40960), 32768);
  EXPECT_EQ(graph_context_bucket(96, 96), 96);
  EXPECT_EQ(graph_context_bucket(97, 96), 0);
}

// Three decode sequences at positions 5, 17 and 2 (block size 4).
Batch decode_batch() {
  Batch b;
  b.tokens = {7, 8, 9};
  b.positions = {5, 17, 2};
  b.seqs = {{0, 1, 5, {0, 1}}, {1, 1, 17, {2, 3, 4, 5, 6}}, {2, 1, 2, {7}}};
  b.logit_tokens = {0, 1, 2};
  return b;
}

TEST(GraphPad, PureDecodeIsRecognised) {
  StepLayout s;
  step_layout_build(decode_batch(), 4, 16, 32, s);
  EXPECT_TRUE(step_is_pure_decode(s));
  Batch prefill = decode_batch();
  prefill.tokens = {7, 8, 9, 10};
  prefill.positions = {5, 17, 2, 3};
  prefill.seqs[2].n_tokens = 2;
  prefill.logit_tokens = {0, 1, 3};
  step_layout_build(prefill, 4, 16, 32, s);
  EXPECT_FALSE(step_is_pure_decode(s));
  Batch no_logits = decode_batch();
  no_logits.logit_tokens = {0, 2};
  step_layout_build(no_logits, 4, 16, 32, s);
  EXPECT_FALSE(step_is_pure_decode(s));
}

TEST(GraphPad, PaddingTokensLiveInTheScratchBlock) {
  StepLayout s;
  step_layout_build(decode_batch(), 4, 16, 32, s);
  ASSERT_EQ(s.max_blocks, 5);
  ASSERT_EQ(s.max_context, 18);
  graph_pad(s, 4, 8, 32, 16);
  EXPECT_EQ(s.n_tokens(), 4);
  EXPECT_EQ(s.n_seqs(), 4);
  EXPECT_EQ(s.tokens, (V{7, 8, 9, 0}));
  EXPECT_EQ(s.positions, (V{5, 17, 2, 0}));
  EXPECT_EQ(s.slots, (V{1 * 4 + 1, 6 * 4 + 1, 7 * 4 + 2, 16 * 4}));
  EXPECT_EQ(s.token_seq, (V{0, 1, 2, 3}));
  EXPECT_EQ(s.logit_rows, (V{0, 1, 2, 3}));
  EXPECT_EQ(s.max_blocks, 8);
  EXPECT_EQ(s.max_context, 32);
  const V tables = {0,  1,  -1, -1, -1, -1, -1, -1,  //
                    2,  3,  4,  5,  6,  -1, -1, -1,  //
                    7,  -1, -1, -1, -1, -1, -1, -1,  //
                    16, -1, -1, -1, -1, -1, -1, -1};
  EXPECT_EQ(s.block_tables, tables);
  EXPECT_EQ(s.state_slots, (V{-1, -1, -1, -1}));  // no recurrent state: none for padding either
}

TEST(GraphPad, PaddingSequencesShareTheScratchStateSlot) {
  StepLayout s;
  Batch b = decode_batch();
  for (size_t i = 0; i < b.seqs.size(); ++i) b.seqs[i].state_slot = static_cast<int32_t>(i) + 2;
  step_layout_build(b, 4, 16, 32, s);
  graph_pad(s, 5, 8, 32, 16, /*scratch_state_slot=*/9);
  EXPECT_EQ(s.state_slots, (V{2, 3, 4, 9, 9}));
  EXPECT_EQ(s.positions, (V{5, 17, 2, 0, 0}));  // at 0: each padded step resets the slot
  // A sequence's own slot must lie among the cache's (here 9): the scratch one is refused.
  b.seqs[1].state_slot = 9;
  EXPECT_THROW(step_layout_build(b, 4, 16, 32, s, 9), Error);
  b.seqs[1].state_slot = 8;
  step_layout_build(b, 4, 16, 32, s, 9);
}

TEST(GraphPad, AStepThatDoesNotFitIsAnInternalError) {
  StepLayout s;
  step_layout_build(decode_batch(), 4, 16, 32, s);
  EXPECT_THROW(graph_pad(s, 2, 8, 32, 16), Error);  // fewer tokens than the step
  EXPECT_THROW(graph_pad(s, 4, 4, 16, 16), Error);  // table narrower than a sequence's
  EXPECT_THROW(graph_pad(s, 4, 8, 16, 16), Error);  // context below the step's
  EXPECT_THROW(graph_pad(s, 4, 5, 32, 16), Error);  // 5 blocks of 4 cannot hold 32 positions
}

TEST(StepLayoutBuild, TokenIdsOutsideTheVocabularyAreRefused) {
  StepLayout s;
  Batch b = decode_batch();
  b.tokens[1] = 32;
  EXPECT_THROW(step_layout_build(b, 4, 16, 32, s), Error);
  b.tokens[1] = -1;
  EXPECT_THROW(step_layout_build(b, 4, 16, 32, s), Error);
}

}  // namespace
}  // namespace memra
