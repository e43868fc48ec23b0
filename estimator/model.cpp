// Parameter tensors and counts (see model.h). Shapes follow the HF modelling code of each
// family; golden totals in tests/estimator/model_test.cpp (GPT-2 124,439,808; Llama-2-7B
// 6,738,415,616; Mixtral-8x7B 46,702,792,704).
#include "estimator/model.h"

#include <algorithm>

namespace memplan {

const char* role_name(Role r) {
  switch (r) {
    case Role::q: return "q"; case Role::k: return "k"; case Role::v: return "v";
    case Role::qkv: return "qkv"; case Role::o: return "o"; case Role::gate: return "gate";
    case Role::up: return "up"; case Role::gate_up: return "gate_up"; case Role::down: return "down";
    case Role::fc_in: return "fc_in"; case Role::q_a: return "q_a"; case Role::q_b: return "q_b";
    case Role::kv_a: return "kv_a"; case Role::kv_b: return "kv_b"; case Role::router: return "router";
    case Role::expert_gate: return "expert_gate"; case Role::expert_up: return "expert_up";
    case Role::expert_down: return "expert_down"; case Role::expert_gate_up: return "expert_gate_up";
    case Role::shared_gate: return "shared_gate";
    case Role::shared_up: return "shared_up"; case Role::shared_down: return "shared_down";
    case Role::shared_expert_gate: return "shared_expert_gate"; case Role::lm_head: return "lm_head";
    case Role::pooler: return "pooler"; case Role::classifier: return "classifier";
    case Role::mlm_transform: return "mlm_transform";
  }
  return "?";
}

bool has_qk_norm(const ModelSpec& m) { return m.qk_norm != QkNorm::none; }

int64_t norms_per_layer(const ModelSpec& m) {
  return (m.pre_norms ? (m.parallel_shared_norm ? 1 : 2) : 0) + (m.post_norms ? 2 : 0);
}

int64_t qk_norm_params(const ModelSpec& m) {
  const int64_t d = m.qk_head_dim();
  switch (m.qk_norm) {
    case QkNorm::none: case QkNorm::l2: return 0;
    case QkNorm::per_head: return 2 * d;  // q_norm, k_norm over the head dimension
    case QkNorm::full_width: case QkNorm::per_head_layer_norm: return (m.num_attention_heads + m.num_key_value_heads) * d;
  }
  return 0;
}

int64_t layer_norm_params(const ModelSpec& m) {
  const int64_t per_norm = m.hidden_size * (m.norm == NormKind::layer_norm && m.norm_bias ? 2 : 1);
  int64_t n = norms_per_layer(m) * per_norm + qk_norm_params(m);
  if (m.mla()) n += m.kv_lora_rank + m.q_lora_rank;  // kv_a_layernorm, q_a_layernorm (RMSNorm)
  return n;
}

std::vector<Linear> layer_linears(const ModelSpec& m, bool moe) {
  const int64_t h = m.hidden_size, a = m.num_attention_heads, k = m.num_key_value_heads, d = m.head_dim;
  std::vector<Linear> out;
  if (m.mla()) {
    // DeepseekV3Attention: q_proj or q_a_proj -> q_a_layernorm -> q_b_proj; kv_a_proj_with_mqa ->
    // kv_a_layernorm -> kv_b_proj; o_proj. attention_bias applies to q_a, kv_a and o.
    const int64_t qd = m.qk_head_dim();
    if (m.q_lora_rank > 0) {
      out.push_back({Role::q_a, h, m.q_lora_rank, m.qkv_bias});                                // (h, r_q)
      out.push_back({Role::q_b, m.q_lora_rank, a * qd, false});                                // (r_q, a*(nope+rope))
    } else {
      out.push_back({Role::q, h, a * qd, false});                                              // (h, a*(nope+rope))
    }
    out.push_back({Role::kv_a, h, m.kv_lora_rank + m.qk_rope_head_dim, m.qkv_bias});           // (h, r_kv + rope)
    out.push_back({Role::kv_b, m.kv_lora_rank, a * (m.qk_nope_head_dim + m.v_head_dim), false});  // (r_kv, a*(nope+v))
    out.push_back({Role::o, a * m.v_head_dim, h, m.o_bias});                                   // (a*v, h)
  } else if (m.fused_qkv) {
    out.push_back({Role::qkv, h, (a + 2 * k) * d, m.qkv_bias});   // (h, (a+2k)d)
    out.push_back({Role::o, a * d, h, m.o_bias});                  // (a*d, h)
  } else {
    out.push_back({Role::q, h, a * d, m.qkv_bias});                // (h, a*d)
    out.push_back({Role::k, h, k * d, m.qkv_bias});                // (h, k*d)
    out.push_back({Role::v, h, k * d, m.qkv_bias});                // (h, k*d)
    out.push_back({Role::o, a * d, h, m.o_bias});                  // (a*d, h)
  }
  if (!moe) {
    const int64_t f = m.intermediate_size;
    if (m.gated_mlp && m.fused_gate_up) {
      out.push_back({Role::gate_up, h, 2 * f, m.mlp_bias});        // (h, 2f)
    } else if (m.gated_mlp) {
      out.push_back({Role::gate, h, f, m.mlp_bias});               // (h, f)
      out.push_back({Role::up, h, f, m.mlp_bias});                 // (h, f)
    } else {
      out.push_back({Role::fc_in, h, f, m.mlp_bias});              // (h, f)
    }
    out.push_back({Role::down, f, h, m.mlp_bias});                 // (f, h)
    return out;
  }
  const int64_t E = m.num_experts, fe = m.expert_width();
  out.push_back({Role::router, h, E, m.router_bias});              // (h, E)
  if (m.fused_expert_gate_up) {
    out.push_back({Role::expert_gate_up, h, 2 * fe, m.expert_bias, E});  // E x (h, 2 f_e)
  } else {
    out.push_back({Role::expert_gate, h, fe, false, E});           // E x (h, f_e)
    out.push_back({Role::expert_up, h, fe, false, E});             // E x (h, f_e)
  }
  out.push_back({Role::expert_down, fe, h, m.expert_bias, E});     // E x (f_e, h)
  if (m.num_shared_experts > 0 || m.shared_expert_intermediate_size > 0) {
    const int64_t fs = m.shared_expert_intermediate_size > 0 ? m.shared_expert_intermediate_size
                                                             : m.num_shared_experts * fe;
    out.push_back({Role::shared_gate, h, fs, false});              // (h, f_s)
    out.push_back({Role::shared_up, h, fs, false});                // (h, f_s)
    out.push_back({Role::shared_down, fs, h, false});              // (f_s, h)
    if (m.shared_expert_gate) out.push_back({Role::shared_expert_gate, h, 1, false});  // (h, 1)
  }
  return out;
}

bool grouped_mm_experts(const TrainingSetup& s) {
  // torch._grouped_mm exists from torch 2.9 ("Please make sure you are using a PyTorch version
  // that includes it (2.9+)", integrations/moe.py); transformers 5 picks it as the experts
  // implementation there (the H200 run, torch 2.11 + transformers 5.17, ran aten::_grouped_mm).
  const ModelSpec& m = s.model;
  return m.num_experts > 0 && m.stacked_experts_v5 && m.moe_impl == MoeImpl::loop && s.runtime.transformers_at_least(5, 0) &&
         s.runtime.torch_at_least(2, 9);
}

std::vector<Linear> layer_linears(const TrainingSetup& s, bool moe) {
  std::vector<Linear> out = layer_linears(s.model, moe);
  if (!moe || !grouped_mm_experts(s) || s.model.fused_expert_gate_up) return out;
  auto gate = std::find_if(out.begin(), out.end(), [](const Linear& l) { return l.role == Role::expert_gate; });
  auto up = std::find_if(out.begin(), out.end(), [](const Linear& l) { return l.role == Role::expert_up; });
  if (gate == out.end() || up == out.end()) return out;
  *gate = Linear{Role::expert_gate_up, gate->in, 2 * gate->out, false, gate->count};  // (E, 2 f_e, h)
  out.erase(up);
  return out;
}

// --- fine-tuning decisions -------------------------------------------------------------------

bool layer_frozen(const TrainingSetup& s, int64_t layer) {
  return s.finetune.mode == FinetuneMode::full && layer < s.finetune.freeze_layers;
}

static bool role_matches(Role r, const std::string& t) {
  auto any = [&](std::initializer_list<const char*> names) {
    return std::any_of(names.begin(), names.end(), [&](const char* n) { return t == n; });
  };
  switch (r) {
    case Role::q: return any({"q", "q_proj", "query"});
    case Role::k: return any({"k", "k_proj", "key"});
    case Role::v: return any({"v", "v_proj", "value"});
    // The fused projection by its module's name in each family that has one (GPT-2 and
    // GPTBigCode c_attn, GPT-NeoX and Falcon query_key_value, Phi-3 qkv_proj, MPT Wqkv, InternLM2
    // wqkv), or memplan's q/k/v. Not q_proj or v_proj: PEFT matches a target by the module's name
    // (peft/tuners/tuners_utils.py check_target_module_exists: equal, or ending in ".name"), and on
    // these models no module has it, so PEFT refuses the config (validate() does too).
    case Role::qkv: return any({"q", "k", "v", "qkv", "qkv_proj", "c_attn", "query_key_value", "Wqkv", "wqkv"});
    case Role::o: return any({"o", "o_proj", "dense", "out_proj", "c_proj", "attn.c_proj", "wo"});
    case Role::q_a: return any({"q_a", "q_a_proj"});
    case Role::q_b: return any({"q_b", "q_b_proj"});
    case Role::kv_a: return any({"kv_a", "kv_a_proj_with_mqa"});
    case Role::kv_b: return any({"kv_b", "kv_b_proj"});
    case Role::expert_gate_up: return any({"gate", "up", "gate_up_proj", "input_linear"});
    case Role::gate: case Role::expert_gate: case Role::shared_gate: return any({"gate", "gate_proj", "w1"});
    case Role::up: case Role::expert_up: case Role::shared_up: return any({"up", "up_proj", "w3"});
    case Role::gate_up: return any({"gate", "up", "gate_up_proj"});
    case Role::down: case Role::expert_down: case Role::shared_down:
      return any({"down", "down_proj", "w2", "c_proj", "mlp.c_proj", "dense_4h_to_h"});
    case Role::fc_in: return any({"up", "fc_in", "c_fc", "fc1", "dense_h_to_4h", "intermediate"});
    default: return false;
  }
}

bool lora_on(const TrainingSetup& s, Role r) {
  if (s.finetune.mode == FinetuneMode::full) return false;
  switch (r) {
    case Role::router: case Role::shared_expert_gate: case Role::lm_head: case Role::pooler:
    case Role::classifier: case Role::mlm_transform:
      return false;
    default: break;
  }
  const auto& t = s.finetune.lora_targets;
  if (t.empty()) return r == Role::q || r == Role::v || r == Role::qkv;  // PEFT default: q and v
  for (const auto& name : t) {
    if (name == "all-linear" || name == "all_linear" || name == "all") return true;
    if (role_matches(r, name)) return true;
  }
  return false;
}

bool base_trainable(const TrainingSetup& s, Role r, int64_t layer) {
  switch (r) {
    // The head's linears are no layer's: they train as the head does, whatever the first layers'
    // freezing (HF's lm_head stays trainable when layers are frozen; PEFT SEQ_CLS trains the score).
    case Role::lm_head: case Role::classifier: case Role::pooler: case Role::mlm_transform:
      return head_trainable(s);
    default:
      return s.finetune.mode == FinetuneMode::full && !layer_frozen(s, layer);
  }
}
bool embeddings_trainable(const TrainingSetup& s) {
  return s.finetune.mode == FinetuneMode::full ? s.finetune.freeze_layers == 0 : s.finetune.train_embeddings;
}
bool head_trainable(const TrainingSetup& s) {
  if (s.finetune.mode == FinetuneMode::full) return true;
  if (s.model.head == HeadKind::sequence_classification) return true;  // PEFT SEQ_CLS trains the head
  return s.finetune.train_head || (s.model.tie_word_embeddings && s.finetune.train_embeddings);
}

double quantized_bits(const Finetune& f) {
  switch (f.base_quant) {
    // NF4: 4 bits + an fp32 absmax per 64-block (0.5 bit); double quant stores the absmax in
    // 8 bits plus an fp32 scale per 256 blocks: 4 + 8/64 + 32/(64*256) = 4.127 bits
    // (Dettmers et al. 2023, QLoRA §2 "Double Quantization").
    case BaseQuant::nf4: return f.double_quant ? 4.0 + 8.0 / 64 + 32.0 / (64 * 256) : 4.5;
    // LLM.int8(): int8 weights + an fp32 scale per output row (bitsandbytes Int8Params).
    case BaseQuant::int8: return 8.0;
    case BaseQuant::none: return 0;
  }
  return 0;
}

bool base_quantized(const TrainingSetup& s) {
  return s.finetune.mode != FinetuneMode::full && (s.model.quantized.any() || s.finetune.base_quant != BaseQuant::none);
}

double base_weight_bits(const TrainingSetup& s) {
  return s.model.quantized.any() ? s.model.quantized.bits : quantized_bits(s.finetune);
}

bool role_quantized(const TrainingSetup& s, Role r) {
  if (!base_quantized(s)) return false;
  switch (r) {
    case Role::router: case Role::shared_expert_gate: case Role::lm_head: case Role::pooler: case Role::classifier:
    case Role::mlm_transform:
      return false;  // kept in 16 bits (modules_to_not_convert / llm_int8_skip_modules: lm_head)
    case Role::expert_gate: case Role::expert_up: case Role::expert_down: case Role::expert_gate_up:
      return true;
    default:
      return !(s.model.quantized.any() && s.model.quantized.experts_only);
  }
}

// --- the list -------------------------------------------------------------------------------

std::vector<ParamTensor> parameter_tensors(const TrainingSetup& s) {
  const ModelSpec& m = s.model;
  const int64_t h = m.hidden_size, V = m.vocab_size, L = m.num_layers;
  const bool lora = s.finetune.mode != FinetuneMode::full;

  const bool emb_train = embeddings_trainable(s);
  std::vector<ParamTensor> t;
  auto add = [&](std::string name, int64_t elems, int64_t count, ParamGroup g, bool mm, bool trainable,
                 bool quantized = false, int64_t rows = 0, int64_t cols = 0) {
    if (elems > 0 && count > 0) t.push_back({std::move(name), elems, count, g, mm, trainable, quantized, rows, cols});
  };

  // PEFT's modules_to_save trains a deep copy and keeps the module it copied, frozen
  // (ModulesToSaveWrapper.update: copy.deepcopy(self.original_module), then
  // original_module.requires_grad_(False); peft/utils/other.py @ v0.13). Tied embeddings aside.
  const bool peft_copies = lora && !m.tie_word_embeddings;
  if (peft_copies && s.finetune.train_embeddings)
    add("embed_tokens.original_module.weight", V * h, 1, ParamGroup::embedding, false, false, false, V, h);  // modules_to_save's original
  add("embed_tokens.weight", V * h, 1, ParamGroup::embedding, m.tie_word_embeddings, emb_train, false, V, h);  // (V, h)
  if (m.positions == PositionKind::learned)
    add("embed_positions.weight", m.max_position_embeddings * h, 1, ParamGroup::embedding, false, emb_train, false,
        m.max_position_embeddings, h);  // (P, h)
  if (m.type_vocab_size > 0)
    add("token_type_embeddings.weight", m.type_vocab_size * h, 1, ParamGroup::embedding, false, emb_train, false,
        m.type_vocab_size, h);  // (T, h)
  if (m.bert_style) add("embeddings.LayerNorm", 2 * h, 1, ParamGroup::norm, false, emb_train);  // (h) x2

  // Layers are grouped by kind (dense/MoE) and by frozen-ness; count = layers of that group.
  struct Group { bool moe; bool frozen; int64_t layers; };
  std::vector<Group> groups;
  for (int64_t i = 0; i < L; ++i) {
    const bool moe = m.is_moe_layer(i), frozen = layer_frozen(s, i);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) { return g.moe == moe && g.frozen == frozen; });
    if (it == groups.end()) groups.push_back({moe, frozen, 1});
    else it->layers += 1;
  }
  for (const Group& g : groups) {
    const std::string pre = g.moe ? "layers.*(moe)." : "layers.*.";
    const bool base_train = !lora && !g.frozen;
    for (const Linear& lin : layer_linears(s, g.moe)) {
      const ParamGroup pg = lin.role == Role::router ? ParamGroup::router
                            : (lin.role == Role::expert_gate || lin.role == Role::expert_up || lin.role == Role::expert_down ||
                               lin.role == Role::expert_gate_up)
                                ? ParamGroup::experts
                            : (lin.role == Role::q || lin.role == Role::k || lin.role == Role::v || lin.role == Role::qkv ||
                               lin.role == Role::o || lin.role == Role::q_a || lin.role == Role::q_b || lin.role == Role::kv_a ||
                               lin.role == Role::kv_b)
                                ? ParamGroup::attention
                                : ParamGroup::mlp;
      const bool qz = role_quantized(s, lin.role);
      if (pg == ParamGroup::experts && grouped_mm_experts(s)) {
        // One stacked (E, out, in) parameter (and (E, out) bias) per layer; _grouped_mm is not on
        // autocast's lists, so no cached half copy (not a `matmul` weight in that sense).
        // Adafactor factors the last two dims: E x (out + in) second-moment entries.
        add(pre + role_name(lin.role) + ".weight", lin.in * lin.out * lin.count, g.layers, pg, false, base_train, qz,
            lin.out * lin.count, lin.in * lin.count);
        if (lin.bias) add(pre + role_name(lin.role) + ".bias", lin.out * lin.count, g.layers, pg, false, base_train);
      } else {
        add(pre + role_name(lin.role) + ".weight", lin.in * lin.out, lin.count * g.layers, pg, true, base_train, qz,
            lin.out, lin.in);
        if (lin.bias) add(pre + role_name(lin.role) + ".bias", lin.out, lin.count * g.layers, pg, false, base_train);
      }
      if (lora_on(s, lin.role)) {
        const int64_t r = s.finetune.lora_rank;
        add(pre + role_name(lin.role) + ".lora_A", r * lin.in, lin.count * g.layers, ParamGroup::adapter, true, true,
            false, r, lin.in);  // (r, in)
        add(pre + role_name(lin.role) + ".lora_B", lin.out * r, lin.count * g.layers, ParamGroup::adapter, true, true,
            false, lin.out, r);  // (out, r)
      }
    }
    add(pre + "norms", layer_norm_params(m), g.layers, ParamGroup::norm, false, base_train);
    if (m.attention_sinks) add(pre + "sinks", m.num_attention_heads, g.layers, ParamGroup::attention, false, base_train);  // (a)
  }
  if (m.final_norm) add("norm", h * (m.norm == NormKind::layer_norm && m.norm_bias ? 2 : 1), 1, ParamGroup::norm, false, !lora);

  const bool head_train = head_trainable(s);
  switch (m.head) {
    case HeadKind::causal_lm:
      if (peft_copies && s.finetune.train_head)
        add("lm_head.original_module.weight", V * h, 1, ParamGroup::head, false, false, false, V, h);  // modules_to_save's original
      if (!m.tie_word_embeddings) add("lm_head.weight", V * h, 1, ParamGroup::head, true, head_train, false, V, h);  // (V, h)
      if (m.lm_head_bias) add("lm_head.bias", V, 1, ParamGroup::head, false, head_train);  // (V)
      break;
    case HeadKind::masked_lm:
      add("cls.transform.dense.weight", h * h, 1, ParamGroup::head, true, head_train, false, h, h);  // (h, h)
      add("cls.transform.dense.bias", h, 1, ParamGroup::head, false, head_train);                  // (h)
      add("cls.transform.LayerNorm", 2 * h, 1, ParamGroup::head, false, head_train);  // (h) x2
      if (!m.tie_word_embeddings) add("cls.decoder.weight", V * h, 1, ParamGroup::head, true, head_train, false, V, h);
      add("cls.decoder.bias", V, 1, ParamGroup::head, false, head_train);             // (V)
      break;
    case HeadKind::sequence_classification:
      if (m.bert_style) {
        add("pooler.dense.weight", h * h, 1, ParamGroup::head, true, head_train, false, h, h);  // (h, h)
        add("pooler.dense.bias", h, 1, ParamGroup::head, false, head_train);                  // (h)
      }
      add("score.weight", h * m.num_labels, 1, ParamGroup::head, true, head_train, false, m.num_labels, h);  // (num_labels, h)
      if (m.bert_style) add("score.bias", m.num_labels, 1, ParamGroup::head, false, head_train);
      break;
  }
  return t;
}

ParameterCounts count_parameters(const TrainingSetup& s) { return count_parameters(s, parameter_tensors(s)); }

ParameterCounts count_parameters(const TrainingSetup& s, const std::vector<ParamTensor>& tensors) {
  ParameterCounts c;
  const ModelSpec& m = s.model;
  for (const ParamTensor& p : tensors) {
    const int64_t n = p.total();
    c.total += n;
    if (p.trainable) {
      c.trainable += n;
      c.largest_trainable = std::max(c.largest_trainable, p.elements);
      c.trainable_tensors += p.count;
      if (p.matmul) c.trainable_matmul += n;
    } else {
      c.frozen += n;
    }
    if (p.quantized) c.quantized += n;
    if (p.group == ParamGroup::embedding) c.embedding += n;
    if (p.group == ParamGroup::adapter) c.adapter += n;
    if (p.matmul) c.matmul += n;
    // Active parameters: routed experts count K_top / E of their total.
    if (p.group == ParamGroup::experts && m.num_experts > 0)
      c.active_per_token += n / m.num_experts * m.experts_per_token;
    else if (p.group != ParamGroup::embedding)
      c.active_per_token += n;
  }
  // Active parameters are the ones a token multiplies (FLOPs): the embedding lookup is not, but
  // a tied embedding matrix serves as the LM head matmul, so it counts once. (Model cards that
  // quote "active" counts usually include the input embedding table too.)
  if (m.tie_word_embeddings && m.head != HeadKind::sequence_classification)
    c.active_per_token += m.vocab_size * m.hidden_size;
  return c;
}

int64_t count_model_parameters(const ModelSpec& m) {
  TrainingSetup s;
  s.model = m;
  return count_parameters(s).total;
}

}  // namespace memplan
