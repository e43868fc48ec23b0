// One reader test per HF family memplan reads from tests/data/hf/<model>/config.json (where each
// file comes from: tests/data/hf/README.md): the parameter count against the model card or the
// checkpoint's safetensors index (source next to each number), and the architecture features the
// reader must set. Refused families are refused with the missing feature named.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <vector>

#include <fmt/format.h>
#include <string>
#include <tuple>

#include "estimator/error.h"
#include "estimator/model.h"
#include "profiles/detail.h"
#include "profiles/profiles.h"

using namespace memplan;
using namespace memplan::profiles;

namespace {

std::string fixture(const std::string& name) { return std::string(MEMPLAN_TEST_DATA) + "/hf/" + name + "/config.json"; }

ModelSpec load(const std::string& name, std::vector<Warning>* warnings = nullptr) {
  return load_model(fixture(name), Where{}, warnings);
}

ParameterCounts counts(const ModelSpec& m) {
  TrainingSetup s;
  s.model = m;
  return count_parameters(s);
}

// A published count given to three significant figures ("7.17B"): the exact count rounds to it
// (within half a unit of the last figure, 0.5% at most).
bool rounds_to(int64_t exact, double published) {
  const double rel = std::fabs(static_cast<double>(exact) - published) / published;
  return rel < 0.006;
}

std::string error_of_text(const std::string& json) {
  try {
    detail::read_hf_config(detail::parse_json(json, "config.json"), "config.json", "m");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string error_of(const std::string& name) {
  try {
    load(name);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("phi: phi-2, parallel attention and MLP off one LayerNorm, partial RoPE 0.4, lm_head bias") {
  const ModelSpec m = load("phi-2");
  // microsoft/phi-2 model card: 2.7 billion parameters; 2,779,683,840 as PhiForCausalLM builds it.
  CHECK(rounds_to(count_model_parameters(m), 2.78e9));
  CHECK(count_model_parameters(m) == 2'779'683'840);
  CHECK(m.parallel_residual);
  CHECK(m.parallel_shared_norm);
  CHECK(norms_per_layer(m) == 1);
  CHECK(m.rotary_fraction == doctest::Approx(0.4));
  CHECK(m.lm_head_bias);
  CHECK(m.activation == Activation::gelu_new);
  CHECK(m.norm == NormKind::layer_norm);
  CHECK(m.qkv_bias);
  CHECK(m.hidden_dropout == doctest::Approx(0.1));
}

TEST_CASE("stablelm: StableLM-3B-4E1T, LayerNorm, partial RoPE 0.25, SwiGLU") {
  const ModelSpec m = load("stablelm-3b-4e1t");
  // stabilityai/stablelm-3b-4e1t model card, "Model Architecture": Parameters 2,795,443,200.
  CHECK(count_model_parameters(m) == 2'795'443'200);
  CHECK(m.norm == NormKind::layer_norm);
  CHECK(m.gated_mlp);
  CHECK(!m.qkv_bias);
  CHECK(!m.parallel_residual);
  CHECK(m.rotary_fraction == doctest::Approx(0.25));
}

TEST_CASE("starcoder2: StarCoder2-7B, biases everywhere, tied, GQA") {
  const ModelSpec m = load("starcoder2-7b");
  // bigcode/starcoder2-7b model card: 7B parameters; the StarCoder2 paper's Table 1: 7.17B.
  CHECK(count_model_parameters(m) == 7'173'923'840);
  CHECK(rounds_to(count_model_parameters(m), 7.17e9));
  CHECK(m.tie_word_embeddings);
  CHECK(m.num_key_value_heads == 4);
  CHECK(!m.gated_mlp);
  CHECK(m.activation == Activation::gelu_tanh);
  CHECK(m.sliding_window == 4096);
  CHECK(m.hidden_dropout == doctest::Approx(0.1));
}

TEST_CASE("gpt_bigcode: SantaCoder, multi-query c_attn, learned positions") {
  const ModelSpec m = load("gpt_bigcode-santacoder");
  // bigcode/gpt_bigcode-santacoder model card: 1.1B parameters.
  CHECK(count_model_parameters(m) == 1'124'886'528);
  CHECK(rounds_to(count_model_parameters(m), 1.12e9));
  CHECK(m.num_key_value_heads == 1);
  CHECK(m.fused_qkv);
  CHECK(m.positions == PositionKind::learned);
  CHECK(m.causal_mask == MaskKind::additive);
}

TEST_CASE("falcon: Falcon-7B as falcon and as the older RefinedWebModel; Falcon-40B as RefinedWeb") {
  const ModelSpec m = load("falcon-7b");
  // tiiuae/falcon-7b model card: 7B parameters; 6,921,720,704 as FalconForCausalLM builds it.
  CHECK(rounds_to(count_model_parameters(m), 6.92e9));
  CHECK(count_model_parameters(m) == 6'921'720'704);
  CHECK(m.num_key_value_heads == 1);  // multi_query
  CHECK(m.parallel_residual);
  CHECK(m.parallel_shared_norm);
  CHECK(!m.qkv_bias);
  CHECK(!m.softmax_fp32);
  CHECK(m.tie_word_embeddings);
  const ModelSpec legacy = load("falcon-7b-refinedwebmodel");
  CHECK(count_model_parameters(legacy) == 6'921'720'704);
  CHECK(legacy.num_key_value_heads == 1);
  CHECK(legacy.parallel_shared_norm);
  // Falcon-40B (tiiuae/falcon-40b model card: 40B; 41.3B as built): 8 KV heads, ln_attn and ln_mlp.
  const ModelSpec big = load("falcon-40b-refinedweb");
  CHECK(big.num_key_value_heads == 8);
  CHECK(big.parallel_residual);
  CHECK(!big.parallel_shared_norm);
  CHECK(norms_per_layer(big) == 2);
  CHECK(count_model_parameters(big) == 41'303'293'952);
}

TEST_CASE("mpt: MPT-7B, ALiBi, no biases, bool causal mask") {
  const ModelSpec m = load("mpt-7b");
  // mosaicml/mpt-7b model card: 6.7B parameters; 6,649,286,656 as MptForCausalLM builds it.
  CHECK(rounds_to(count_model_parameters(m), 6.65e9));
  CHECK(count_model_parameters(m) == 6'649'286'656);
  CHECK(m.positions == PositionKind::alibi);
  CHECK(!m.norm_bias);
  CHECK(m.fused_qkv);
  CHECK(m.causal_mask == MaskKind::bool_4d);
  CHECK(m.intermediate_size == 4 * 4096);
}

TEST_CASE("olmo2 / olmo3: post norms only, full-width q/k norm, OLMo-3's sliding layers") {
  const ModelSpec m = load("olmo-2-1124-7b");
  // allenai/OLMo-2-1124-7B model card: 7B (OLMo 2 paper: 7.30B).
  CHECK(rounds_to(count_model_parameters(m), 7.30e9));
  CHECK(count_model_parameters(m) == 7'298'617'344);
  CHECK(!m.pre_norms);
  CHECK(m.post_norms);
  CHECK(norms_per_layer(m) == 2);
  CHECK(m.qk_norm == QkNorm::full_width);
  CHECK(qk_norm_params(m) == 2 * 4096);
  const ModelSpec o3 = load("olmo-3-1025-7b");
  // allenai/Olmo-3-1025-7B model card: 7B; vocabulary 100,278 instead of OLMo 2's 100,352.
  CHECK(count_model_parameters(o3) == 7'298'011'136);
  CHECK(o3.sliding_window == 4096);
  CHECK(o3.global_attention_every == 4);
}

TEST_CASE("cohere: Aya-23-8B, one LayerNorm for parallel attention and MLP, logit scale, tied") {
  const ModelSpec m = load("aya-23-8b");
  // CohereForAI/aya-23-8B model card: 8 billion parameters (8.03B).
  CHECK(count_model_parameters(m) == 8'028'033'024);
  CHECK(rounds_to(count_model_parameters(m), 8.03e9));
  CHECK(m.parallel_shared_norm);
  CHECK(m.norm_fp32_manual);
  CHECK(!m.norm_bias);
  CHECK(m.logit_scale == doctest::Approx(0.0625));
  CHECK(m.tie_word_embeddings);
  CHECK(m.qk_norm == QkNorm::none);
}

TEST_CASE("internlm2: InternLM2.5-7B, fused wqkv, GQA") {
  const ModelSpec m = load("internlm2_5-7b");
  // internlm/internlm2_5-7b model card: 7B (7.74B).
  CHECK(count_model_parameters(m) == 7'737'708'544);
  CHECK(rounds_to(count_model_parameters(m), 7.74e9));
  CHECK(m.fused_qkv);
  CHECK(m.num_key_value_heads == 8);
  CHECK(!m.qkv_bias);
}

TEST_CASE("granitemoe: Granite-3.0-1B-A400M, every layer MoE with fused input_linear, multipliers") {
  const ModelSpec m = load("granite-3.0-1b-a400m-base");
  const ParameterCounts c = counts(m);
  // ibm-granite/granite-3.0-1b-a400m-base model card: 1.3B total, 400M active parameters.
  CHECK(c.total == 1'334'628'352);
  CHECK(rounds_to(c.total, 1.33e9));
  CHECK(c.active_per_token == 428'658'688);  // 0.43B with the tied head; the card rounds to "400M"
  CHECK(m.num_experts == 32);
  CHECK(m.experts_per_token == 8);
  CHECK(m.fused_expert_gate_up);
  CHECK(m.router == RouterKind::topk_softmax);
  CHECK(m.residual_multiplier == doctest::Approx(0.22));
  CHECK(m.logit_scale == doctest::Approx(1.0 / 6.0));
  CHECK(m.scale_embeddings);
  CHECK(m.is_moe_layer(0));
}

TEST_CASE("deepseek (DeepSeekMoE 16B): dense first layer, 64 routed + 2 shared experts, standard attention") {
  const ModelSpec m = load("deepseek-moe-16b-base");
  const ParameterCounts c = counts(m);
  // deepseek-ai/deepseek-moe-16b-base model card / DeepSeekMoE paper: 16.4B total, 2.8B activated.
  CHECK(c.total == 16'375'728'128);
  CHECK(rounds_to(c.total, 16.4e9));
  CHECK(!m.mla());
  CHECK(!m.is_moe_layer(0));
  CHECK(m.is_moe_layer(1));
  CHECK(m.num_shared_experts == 2);
  CHECK(!m.norm_topk_prob);
  // Latent attention where a config states kv_lora_rank (all four widths then), as for V2/V3.
  std::string text = detail::read_text_file(fixture("deepseek-moe-16b-base"));
  text.insert(text.find('{') + 1, R"("kv_lora_rank": 512, )");
  CHECK(error_of_text(text).find("missing 'qk_rope_head_dim'") != std::string::npos);
  text.insert(text.find('{') + 1, R"("qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, )");
  const ModelSpec mla = detail::read_hf_config(detail::parse_json(text, "config.json"), "config.json", "mla").spec;
  CHECK(mla.mla());
  CHECK(mla.qk_head_dim() == 192);
  CHECK(mla.num_key_value_heads == mla.num_attention_heads);
}

TEST_CASE("deepseek_v2: DeepSeek-V2-Lite, multi-head latent attention without a q bottleneck") {
  const ModelSpec m = load("deepseek-v2-lite");
  const ParameterCounts c = counts(m);
  // deepseek-ai/DeepSeek-V2-Lite model card: 15.7B total, 2.4B activated.
  CHECK(c.total == 15'706'484'224);
  CHECK(rounds_to(c.total, 15.7e9));
  CHECK(m.mla());
  CHECK(m.q_lora_rank == 0);
  CHECK(m.kv_lora_rank == 512);
  CHECK(m.qk_head_dim() == 192);
  CHECK(m.attn_out_dim() == 128);
  CHECK(m.router == RouterKind::softmax_topk);
  // A latent attention's rotary part and v have a width: 0 is an error at the key (it divided by
  // zero in the attention's split, a SIGFPE, before validate() checked it).
  const std::string text = detail::read_text_file(fixture("deepseek-v2-lite"));
  for (const auto& [from, to, line] : {std::tuple{"\"v_head_dim\": 128", "\"v_head_dim\": 0", 57},
                                       std::tuple{"\"qk_rope_head_dim\": 64", "\"qk_rope_head_dim\": 0", 36}}) {
    std::string bad = text;
    bad.replace(bad.find(from), std::string(from).size(), to);
    try {
      detail::read_hf_config(detail::parse_json(bad, "config.json"), "config.json", "bad");
      FAIL("no error for " << to);
    } catch (const InputError& e) {
      CHECK(e.where().line == line);
      CHECK(std::string(e.what()).find("must be at least 1 with multi-head latent attention (got 0)") != std::string::npos);
    }
  }
}

TEST_CASE("deepseek_v3 and kimi_k2: MLA with q_lora_rank, sigmoid group-limited routing, fp32 combine") {
  const ModelSpec m = load("deepseek-v3");
  const ParameterCounts c = counts(m);
  // deepseek-ai/DeepSeek-V3 model card: 671B total (685B with the 14B multi-token-prediction
  // module, which transformers does not build), 37B activated.
  CHECK(c.total == 671'026'404'352);
  CHECK(rounds_to(c.total, 671e9));
  CHECK(m.q_lora_rank == 1536);
  CHECK(m.first_dense_layers == 3);
  CHECK(m.router == RouterKind::sigmoid);
  CHECK(m.router_fp32);
  CHECK(m.moe_fp32_combine);
  CHECK(m.routed_scaling_factor == doctest::Approx(2.5));
  CHECK(m.expert_groups == 8);
  CHECK(m.topk_groups == 4);
  const ModelSpec k = load("kimi-k2-instruct");
  // moonshotai/Kimi-K2-Instruct model card: 1T total parameters (1.04T), 32B activated.
  CHECK(count_model_parameters(k) == 1'026'408'209'408);
  CHECK(k.model_type == "kimi_k2");
  CHECK(k.num_experts == 384);
  CHECK(k.num_attention_heads == 64);
}

TEST_CASE("gpt_oss: gpt-oss-20b, attention sinks, biased experts with the clamped SwiGLU, sliding layers") {
  const ModelSpec m = load("gpt-oss-20b");
  const ParameterCounts c = counts(m);
  // openai/gpt-oss-20b model card (gpt-oss model card, Table 1): 20.91B total, 3.61B active.
  CHECK(c.total == 20'914'757'184);
  CHECK(rounds_to(c.total, 20.91e9));
  CHECK(rounds_to(c.active_per_token, 3.61e9));
  CHECK(m.attention_sinks);
  CHECK(m.router_bias);
  CHECK(m.expert_bias);
  CHECK(m.clamped_swiglu);
  CHECK(m.num_experts == 32);
  CHECK(m.experts_per_token == 4);
  CHECK(m.sliding_window == 128);
  CHECK(m.global_attention_every == 2);
}

TEST_CASE("gemma3: the text model inside text_config (Config defaults fill it), and Gemma3ForCausalLM") {
  std::vector<Warning> warnings;
  const ModelSpec m = load("gemma-3-4b-pt", &warnings);
  REQUIRE(warnings.size() == 1);
  CHECK(std::string(warnings[0].message).find("only its text model") != std::string::npos);
  // Gemma 3 technical report, Table 1: 4B = 417M vision + 675M embedding + 3,209M non-embedding.
  const int64_t embedding = m.vocab_size * m.hidden_size;
  CHECK(count_model_parameters(m) - embedding == 3'209'010'688);
  CHECK(m.num_attention_heads == 8);   // Gemma3TextConfig default
  CHECK(m.num_key_value_heads == 4);   // Gemma3TextConfig default
  CHECK(m.head_dim == 256);
  CHECK(m.vocab_size == 262208);
  CHECK(m.qk_norm == QkNorm::per_head);
  CHECK(m.post_norms);
  CHECK(m.attn_softcap == 0.0);
  CHECK(m.sliding_window == 1024);
  CHECK(m.tie_word_embeddings);
  const ModelSpec one = load("gemma-3-1b-it");
  // Table 1: 1B = 302M embedding + 698M non-embedding.
  CHECK(one.vocab_size * one.hidden_size == 301'989'888);
  CHECK(count_model_parameters(one) - one.vocab_size * one.hidden_size == 697'896'064);
  CHECK(one.global_attention_every == 6);
  // A text_config that states nothing is Gemma3TextConfig's defaults, its 4096-token window too
  // (families.yaml's hf.defaults, which the sliding-window reader takes).
  for (const char* text : {R"({"model_type": "gemma3_text"})", R"({"model_type": "gemma3", "text_config": {}})"}) {
    CAPTURE(text);
    const ModelSpec d = detail::read_hf_config(detail::parse_json(text, "config.json"), "config.json", "g").spec;
    CHECK(d.model_type == "gemma3_text");
    CHECK(d.hidden_size == 2304);
    CHECK(d.num_layers == 26);
    CHECK(d.sliding_window == 4096);
    CHECK(d.max_position_embeddings == 131072);
  }
}

TEST_CASE("llama4: Llama-4-Scout's text model, all-experts MoE with a shared expert") {
  std::vector<Warning> warnings;
  const ModelSpec m = load("llama-4-scout-17b-16e", &warnings);
  CHECK(warnings.size() == 1);
  const ParameterCounts c = counts(m);
  // meta-llama/Llama-4-Scout-17B-16E model card: 17B active, 109B total (the total includes the
  // vision encoder and projector; the text model is 107.77B).
  CHECK(c.total == 107'769'861'120);
  CHECK(c.active_per_token + m.vocab_size * m.hidden_size == 17'172'894'720);  // cards count the input embedding
  CHECK(m.moe_impl == MoeImpl::all_experts);
  CHECK(m.router == RouterKind::topk_sigmoid);
  CHECK(m.num_shared_experts == 1);
  CHECK(m.qk_norm == QkNorm::l2);
  CHECK(m.intermediate_size == 16384);
  CHECK(m.expert_width() == 8192);
  CHECK(!m.tie_word_embeddings);
}

TEST_CASE("roberta: roberta-base as RobertaForMaskedLM") {
  const ModelSpec m = load("roberta-base");
  // FacebookAI/roberta-base model card: 125M parameters; 124,697,433 as RobertaForMaskedLM builds it
  // (no pooler; the decoder weight tied to the embeddings, its bias counted).
  CHECK(rounds_to(count_model_parameters(m), 125e6));
  CHECK(count_model_parameters(m) == 124'697'433);
  CHECK(m.bert_style);
  CHECK(m.head == HeadKind::masked_lm);
  CHECK(m.type_vocab_size == 1);
  CHECK(m.max_position_embeddings == 514);
}

TEST_CASE("refused families name the missing feature; JSON Infinity in a config is read") {
  CHECK(error_of("t5-small").find("encoder-decoder model: memplan does not model a decoder stack with cross-attention") !=
        std::string::npos);
  const std::string nemotron = error_of("nvidia-nemotron-nano-9b-v2");
  CHECK(nemotron.find("state-space (Mamba) layers") != std::string::npos);  // the Infinity literal parsed first
  CHECK(nemotron.find("nemotron_h") != std::string::npos);
}

TEST_CASE("every supported family has defaults, and the features it declares are consistent") {
  for (const std::string& t : supported_model_types()) {
    CAPTURE(t);
    const auto m = family_defaults(t);
    REQUIRE(m.has_value());
    CHECK(norms_per_layer(*m) >= 1);
    if (m->parallel_shared_norm) CHECK(m->parallel_residual);
    CHECK(m->rotary_fraction > 0);
    CHECK(m->rotary_fraction <= 1);
  }
}

// The table (profiles/families.yaml): an entry starts from ModelSpec's defaults or from what it is
// `like`, and sets fields by their ModelSpec names; what is wrong in it is an error at its line.
namespace {
std::string table_error(const std::string& text, const std::string& type) {
  try {
    detail::family_from_text(text, "families.yaml", type);
  } catch (const InputError& e) {
    return e.where().str() + ": " + e.message() + " (" + e.hint() + ")";
  }
  return "no error";
}
}  // namespace

TEST_CASE("families.yaml: entries chain through like, fields by their names, errors at their lines") {
  const std::string table =
      "bases:\n"
      "  - name: lineage\n"
      "    norm: rms_norm\n"
      "    tie_word_embeddings: false\n"
      "families:\n"
      "  - type: a\n"
      "    like: lineage\n"
      "    rotary_fraction: 0.5\n"
      "  - type: b\n"
      "    like: a\n"
      "    source: a citation\n"
      "    tie_word_embeddings: true\n"
      "    router: topk_sigmoid\n";
  const auto b = detail::family_from_text(table, "families.yaml", "b");
  REQUIRE(b.has_value());
  CHECK(b->model_type == "b");
  CHECK(b->norm == NormKind::rms_norm);         // from the base, through a
  CHECK(b->rotary_fraction == 0.5);             // from a
  CHECK(b->tie_word_embeddings);                // its own, over the base's
  CHECK(b->router == RouterKind::topk_sigmoid);
  CHECK(b->activation == ModelSpec{}.activation);  // unwritten: ModelSpec's default
  CHECK_FALSE(detail::family_from_text(table, "families.yaml", "lineage").has_value());  // a base is no family
  CHECK_FALSE(detail::family_from_text(table, "families.yaml", "c").has_value());

  const std::string head = "bases:\nfamilies:\n  - type: a\n";
  CHECK(table_error(head + "    norm_topk_prb: false\n", "a") == "families.yaml:4:5: unknown key 'norm_topk_prb' (did you mean 'norm_topk_prob'?)");
  CHECK(table_error(head + "    router: sigmoidal\n", "a") ==
        "families.yaml:4:5: unknown router 'sigmoidal' (expected one of: softmax_topk, topk_softmax, sigmoid, topk_sigmoid)");
  CHECK(table_error(head + "    like: nowhere\n", "a").rfind("families.yaml:4:", 0) == 0);
  CHECK(table_error(head + "    like: nowhere\n", "a").find("'a' is like 'nowhere', which has no entry") != std::string::npos);
  CHECK(table_error(head + "    like: a\n", "a").find("'a' is its own ancestor through `like`") != std::string::npos);
  CHECK(table_error(head + "  - type: a\n", "a") == "families.yaml:4:5: 'a' has two entries (the first is at line 3)");
  CHECK(table_error(head + "    rotary_fraction: half\n", "a").rfind("families.yaml:4:", 0) == 0);
  CHECK(table_error("models:\n", "a").rfind("families.yaml:1:1: unexpected 'models:' at the top level", 0) == 0);
  CHECK(table_error("families\n", "a").rfind("families.yaml:1:1: unexpected 'families' at the top level", 0) == 0);
  CHECK(table_error("  - type: a\n", "a").rfind("families.yaml:1:3: expected an entry", 0) == 0);  // before any list
  CHECK(table_error("bases:\n  - type: a\n", "a").rfind("families.yaml:2:5: an entry of 'bases' starts with 'name:'", 0) == 0);
  CHECK(table_error("bases:\n", "a").find("no families") != std::string::npos);
  // A YAML syntax error in an entry is reported at its line of the file, not of the entry.
  CHECK(table_error(head + "    rotary_fraction: 0.5: x\n", "a").rfind("families.yaml:4:", 0) == 0);
  CHECK(table_error("bases:\n  - name: b\n    gated_mlp: true\nfamilies:\n  - type: a\n    name: x\n", "a") ==
        "families.yaml:6:5: a family has a type, not a name (bases: entries are '- name: ...', families: entries '- type: ...')");
  std::string deep = "bases:\n  - name: b0\n";
  for (int i = 1; i <= 40; ++i) deep += fmt::format("  - name: b{}\n    like: b{}\n", i, i - 1);
  CHECK(table_error(deep + "families:\n  - type: a\n    like: b40\n", "a").find("more than 32 entries down a `like` chain") != std::string::npos);
  const auto quoted = detail::family_from_text("families:\n  - type: \"a #1\"  # a comment\n", "families.yaml", "a #1");
  REQUIRE(quoted.has_value());
  CHECK(quoted->model_type == "a #1");
}

// Every field the table can set reads back as written (the names are ModelSpec's members).
TEST_CASE("families.yaml: every ModelSpec field by name") {
  const std::vector<std::pair<std::string, std::string>> fields = model_fields_text(ModelSpec{});
  CHECK(fields.size() >= 79);
  std::string table = "bases:\nfamilies:\n  - type: all\n";
  for (const auto& [name, value] : fields) {
    if (name == "name" || name == "model_type") continue;
    // A value that differs from the default where the kind allows one.
    std::string v = value == "true" ? "false" : value == "false" ? "true" : value;
    if (name == "hidden_size" || name == "num_experts") v = "7";
    if (name == "norm") v = "rms_norm";
    if (name == "qk_norm") v = "full_width";
    if (name == "logit_scale") v = "0.25";
    table += "    " + name + ": " + (v.empty() ? "\"x\"" : v) + "\n";
  }
  const auto m = detail::family_from_text(table, "families.yaml", "all");
  REQUIRE(m.has_value());
  for (const auto& field : model_fields_text(*m)) {
    const std::string& name = field.first;
    const std::string& value = field.second;
    CAPTURE(name);
    if (name == "hidden_size" || name == "num_experts") CHECK(value == "7");
    if (name == "tie_word_embeddings") CHECK(value == "false");
    if (name == "norm") CHECK(value == "rms_norm");
    if (name == "qk_norm") CHECK(value == "full_width");
    if (name == "logit_scale") CHECK(value == "0.25");
  }
}

TEST_CASE("every family's fixture estimates: positive phases, activations that grow with the micro-batch") {
  for (const char* name : {"phi-2", "stablelm-3b-4e1t", "starcoder2-7b", "gpt_bigcode-santacoder", "falcon-7b", "mpt-7b",
                           "olmo-2-1124-7b", "olmo-3-1025-7b", "aya-23-8b", "internlm2_5-7b", "granite-3.0-1b-a400m-base",
                           "deepseek-moe-16b-base", "deepseek-v2-lite", "gpt-oss-20b", "gemma-3-1b-it", "roberta-base"}) {
    CAPTURE(name);
    TrainingSetup s;
    s.model = load(name);
    s.model.num_layers = std::min<int64_t>(s.model.num_layers, 4);  // the layer kinds, not the depth
    s.batch.seq_len = 256;
    for (AttentionImpl a : {AttentionImpl::eager, AttentionImpl::sdpa, AttentionImpl::flash})
      for (Precision p : {Precision::fp32, Precision::amp_bf16, Precision::bf16})
        for (const char* ckpt : {"none", "full"}) {
          CAPTURE(to_string(a));
          CAPTURE(to_string(p));
          CAPTURE(ckpt);
          s.attention = a;
          s.precision = p;
          s.checkpointing = *parse_checkpointing(ckpt);
          REQUIRE(validate(s).empty());
          s.batch.micro_batch = 1;
          const MemoryBreakdown one = estimate(s);
          s.batch.micro_batch = 2;
          const MemoryBreakdown two = estimate(s);
          CHECK(one.peak_bytes() > 0);
          CHECK(one.at(Phase::forward)[Term::activations] > 0);
          CHECK(two.at(Phase::forward)[Term::activations] > one.at(Phase::forward)[Term::activations]);
          // The tensors' peak (the allocator's overhead, replayed on CUDA, need not grow with the batch:
          // estimator/sequence.h).
          auto tensors = [](const MemoryBreakdown& b) {
            int64_t m = 0;
            for (const PhaseState& ph : b.phases) m = std::max(m, ph.total() - ph[Term::allocator_overhead]);
            return m;
          };
          CHECK(tensors(two) >= tensors(one));
        }
  }
}

// How the HF reader reads each family (families.yaml's hf:): keys and defaults merge down the
// `like` chain one by one, required and quirks whole; text_model is the entry's own; an alias reads
// as its family under its own name; what is wrong is an error at its line.
TEST_CASE("families.yaml hf: keys, required, defaults, quirks, text_model and aliases") {
  const std::string table =
      "bases:\n"
      "  - name: cfg\n"
      "    hf:\n"
      "      keys:\n"
      "        hidden_size: hidden_size\n"
      "        num_layers: [num_hidden_layers, n_layer]\n"
      "        vocab_size: vocab_size\n"
      "      required: [hidden_size]\n"
      "      defaults: {vocab_size: 7}\n"
      "families:\n"
      "  - type: a\n"
      "    like: cfg\n"
      "    aliases: [a_old, a_older]\n"
      "    hf:\n"
      "      keys:\n"
      "        hidden_size: d_model\n"
      "        num_layers: []\n"
      "      defaults: {d_model: 64}\n"
      "      quirks: [mlp_4x]\n"
      "      text_model: b\n"
      "  - type: b\n"
      "    like: a\n"
      "    hf:\n"
      "      required: [vocab_size, hidden_size]\n";
  const auto a = detail::hf_family_from_text(table, "families.yaml", "a");
  REQUIRE(a.has_value());
  CHECK(a->hf.keys.at("hidden_size") == std::vector<std::string>{"d_model"});  // its own over the base's
  CHECK(a->hf.keys.at("num_layers").empty());                                 // dropped
  CHECK(a->hf.keys.at("vocab_size") == std::vector<std::string>{"vocab_size"});  // the base's
  CHECK(a->hf.required == std::vector<std::string>{"hidden_size"});
  CHECK(a->hf.defaults == std::map<std::string, double>{{"d_model", 64}, {"vocab_size", 7}});
  CHECK(a->hf.quirks == std::vector<std::string>{"mlp_4x"});
  CHECK(a->hf.text_model == "b");
  const auto b = detail::hf_family_from_text(table, "families.yaml", "b");
  REQUIRE(b.has_value());
  CHECK(b->hf.text_model.empty());  // a wrapper's own
  CHECK(b->hf.quirks == std::vector<std::string>{"mlp_4x"});
  CHECK(b->hf.required == (std::vector<std::string>{"vocab_size", "hidden_size"}));
  const auto old = detail::hf_family_from_text(table, "families.yaml", "a_older");
  REQUIRE(old.has_value());
  CHECK(old->spec.model_type == "a_older");
  CHECK(old->hf.keys == a->hf.keys);
  CHECK_FALSE(detail::family_from_text(table, "families.yaml", "a_old").has_value());  // not a supported type of its own
  CHECK_FALSE(detail::hf_family_from_text(table, "families.yaml", "cfg").has_value());

  // The bundled table: Falcon's legacy types, the wrappers' text models.
  const auto rw = detail::hf_family("RefinedWeb");
  REQUIRE(rw.has_value());
  CHECK(rw->spec.model_type == "RefinedWeb");
  CHECK(rw->hf.keys == detail::hf_family("falcon")->hf.keys);
  CHECK(detail::hf_family("gemma3")->hf.text_model == "gemma3_text");
  CHECK(detail::hf_family("llama4")->hf.text_model == "llama4_text");
  CHECK(detail::hf_family("gemma3_text")->hf.text_model.empty());

  // table_error's text up to the hint.
  auto error_of = [](const std::string& text, const std::string& type) {
    const std::string e = table_error(text, type);
    return e.substr(0, e.find(" ("));
  };
  const std::string head = "families:\n  - type: a\n    hf:\n";
  CHECK(error_of(head + "      keys: {hiden_size: n_embd}\n", "a") == "families.yaml:4:14: 'hiden_size' is not a ModelSpec field");
  CHECK(error_of(head + "      keys:\n        norm: layer_norm_type\n", "a") ==
        "families.yaml:5:9: 'norm' is not read from a config key");
  CHECK(error_of(head + "      quirks: [mlp_4x, mlp_8x]\n", "a") == "families.yaml:4:7: no quirk reader 'mlp_8x'");
  CHECK(error_of(head + "      kyes: {}\n", "a") == "families.yaml:4:7: unknown key 'hf.kyes'");
  CHECK(error_of(head + "      required: [vocab_size]\n", "a") ==
        "families.yaml:2:5: 'a' requires vocab_size from its config but has no key for it");
  CHECK(error_of(head + "      keys: [hidden_size]\n", "a") == "families.yaml:4:7: hf.keys must be a mapping of fields to config keys");
  CHECK(error_of("families:\n  - type: a\n    aliases: [b]\n  - type: b\n", "a") == "families.yaml:3:5: 'b' is named twice");
  CHECK(error_of("families:\n  - type: a\n    aliases: [x]\n  - type: b\n    aliases: [x]\n", "a") ==
        "families.yaml:5:5: 'x' is named twice");
  CHECK(error_of("families:\n  - type: a\n    aliases:\n      - x\n", "a") ==
        "families.yaml:3:5: aliases: takes a list on its line, such as [RefinedWeb, RefinedWebModel]");
}

// What memplan refuses (families.yaml's refused:): by model_type, by a key stated true, by a key
// stated at all; the table's mistakes at their lines.
TEST_CASE("families.yaml refused: the bundled entries and the table's form") {
  auto refusal = [](const std::string& json) {
    try {
      detail::read_hf_config(detail::parse_json(json, "config.json"), "config.json", "m");
    } catch (const InputError& e) {
      return e.message() + " | " + e.hint();
    }
    return std::string("read");
  };
  CHECK(refusal(R"({"model_type": "bart"})") ==
        "model_type 'bart' is an encoder-decoder model: memplan does not model a decoder stack with cross-attention over the "
        "encoder's output | memplan estimates decoder-only language models and BERT-style encoders");
  CHECK(refusal(R"({"model_type": "llama", "is_encoder_decoder": true})").rfind("model_type 'llama' is an encoder-decoder model", 0) == 0);
  CHECK(refusal(R"({"model_type": "llama", "is_encoder_decoder": false})").find("encoder-decoder") == std::string::npos);
  CHECK(refusal(R"({"model_type": "llama", "mamba_d_state": 16})") ==
        "model_type 'llama' has state-space (Mamba) layers: memplan does not model their selective scan's saved tensors | "
        "memplan estimates attention + MLP/MoE transformer layers");
  CHECK(refusal(R"({"model_type": "zamba2"})").rfind("model_type 'zamba2' has state-space (Mamba) layers", 0) == 0);

  const std::string families = "families:\n  - type: a\n";
  const auto r = detail::refused_from_text(families + "refused:\n  - what: is odd\n    why: no\n    types: [x, y]\n    when_present: [k]\n",
                                           "families.yaml");
  REQUIRE(r.size() == 1);
  CHECK(r[0].what == "is odd");
  CHECK(r[0].types == std::vector<std::string>{"x", "y"});
  CHECK(r[0].when_present == std::vector<std::string>{"k"});
  CHECK(r[0].when_true.empty());
  auto error_of = [](const std::string& text) {
    try {
      detail::refused_from_text(text, "families.yaml");
    } catch (const InputError& e) {
      return e.where().str() + ": " + e.message();
    }
    return std::string("no error");
  };
  CHECK(error_of(families + "refused:\n  - what: is odd\n    why: no\n    typs: [x]\n") ==
        "families.yaml:6:5: unknown key 'typs'");  // the hint names 'types'
  CHECK(error_of(families + "refused:\n  - what: is odd\n    types: [x]\n") ==
        "families.yaml:4:5: a refused: entry says what the model is and why memplan cannot estimate it ('what:', 'why:')");
  CHECK(error_of(families + "refused:\n  - what: a\n    why: b\nrefused:\n").rfind("families.yaml:6:1: a second 'refused:'", 0) == 0);
  // A type is read as a family or refused, not both; the section may come first and cite a source.
  CHECK(error_of(families + "refused:\n  - what: a\n    why: b\n    types: [x, a]\n") == "families.yaml:6:5: 'a' is refused and has an entry");
  const auto first = detail::refused_from_text("refused:\n  # a comment\n  - what: a\n    why: b\n    source: somewhere\n    types: [x]\n" + families,
                                               "families.yaml");
  REQUIRE(first.size() == 1);
  CHECK(first[0].types == std::vector<std::string>{"x"});
}
