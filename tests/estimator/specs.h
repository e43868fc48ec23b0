// Hand-written model specs for estimator tests that must not depend on profiles/ (the profile
// tests check that the bundled configs produce the same specs).
#pragma once

#include "estimator/setup.h"

namespace memplan::testing {

// GPT-2 small as HF GPT2Config defaults (vocab 50257, n_positions 1024).
inline ModelSpec gpt2() {
  ModelSpec m;
  m.name = "gpt2";
  m.model_type = "gpt2";
  m.hidden_size = 768;
  m.num_layers = 12;
  m.num_attention_heads = 12;
  m.num_key_value_heads = 12;
  m.head_dim = 64;
  m.intermediate_size = 3072;
  m.vocab_size = 50257;
  m.max_position_embeddings = 1024;
  m.norm = NormKind::layer_norm;
  m.activation = Activation::gelu_new;
  m.positions = PositionKind::learned;
  m.tie_word_embeddings = true;
  m.attention_dropout = m.hidden_dropout = m.embedding_dropout = 0.1;
  m.fused_qkv = true;  // c_attn
  m.causal_mask = MaskKind::bool_buffer;
  m.softmax_fp32 = false;
  m.attn_weights_held_by_layer = false;
  return m;
}

// Llama-2-7B (meta-llama/Llama-2-7b-hf config.json).
inline ModelSpec llama2_7b() {
  ModelSpec m;
  m.name = "llama-2-7b";
  m.model_type = "llama";
  m.hidden_size = 4096;
  m.num_layers = 32;
  m.num_attention_heads = 32;
  m.num_key_value_heads = 32;
  m.head_dim = 128;
  m.intermediate_size = 11008;
  m.vocab_size = 32000;
  m.max_position_embeddings = 4096;
  m.norm = NormKind::rms_norm;
  m.activation = Activation::silu;
  m.gated_mlp = true;
  m.positions = PositionKind::rotary;
  m.tie_word_embeddings = false;
  m.qkv_bias = m.o_bias = m.mlp_bias = m.norm_bias = false;
  return m;
}

// Mixtral-8x7B (mistralai/Mixtral-8x7B-v0.1 config.json).
inline ModelSpec mixtral() {
  ModelSpec m = llama2_7b();
  m.name = "mixtral-8x7b";
  m.model_type = "mixtral";
  m.num_key_value_heads = 8;
  m.intermediate_size = 14336;
  m.vocab_size = 32000;
  m.num_experts = 8;
  m.experts_per_token = 2;
  return m;
}

// moe-nano (profiles/models/moe-nano.json, memplan's own Mixtral-style stand-in): h 512, 8 layers,
// 8 heads / 4 KV heads of 64, 4 experts of width 1408, top-2, vocab 32000; transformers 5 stacks
// its experts (MixtralExperts).
inline ModelSpec moe_nano() {
  ModelSpec m = mixtral();
  m.name = "moe-nano";
  m.hidden_size = 512;
  m.num_layers = 8;
  m.num_attention_heads = 8;
  m.num_key_value_heads = 4;
  m.head_dim = 64;
  m.intermediate_size = 1408;
  m.num_experts = 4;
  m.stacked_experts_v5 = true;
  return m;
}

// BERT-base as HF BertConfig defaults with a masked-LM head (google-bert/bert-base-uncased).
inline ModelSpec bert_base() {
  ModelSpec m;
  m.name = "bert-ish";
  m.model_type = "bert";
  m.head = HeadKind::masked_lm;
  m.bert_style = true;
  m.final_norm = false;
  m.hidden_size = 768;
  m.num_layers = 12;
  m.num_attention_heads = 12;
  m.num_key_value_heads = 12;
  m.head_dim = 64;
  m.intermediate_size = 3072;
  m.vocab_size = 30522;
  m.max_position_embeddings = 512;
  m.type_vocab_size = 2;
  m.activation = Activation::gelu;
  m.attention_dropout = m.hidden_dropout = m.embedding_dropout = 0.1;
  m.causal_mask = MaskKind::padding;
  m.softmax_fp32 = false;
  return m;
}

}  // namespace memplan::testing
