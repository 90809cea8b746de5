#!/usr/bin/env python3
"""check.py: plait against transformers on the same weights and tokens (make interop-check).

For GPT-2 and Llama (grouped-query attention), a small random model is made in transformers (nothing is
downloaded) and saved with save_pretrained; then, for plait's programs at one rank and at tp 2 · pp 2:
  - `plait import` brings it in, and `DIR/train --eval` gives transformers' loss on the same token file
    (fp32 within 1e-6 relative; a --double build within 1e-12, against transformers in float64);
  - one training step from `--init` gives transformers' gradients: Adam's first moment after one step is
    (1 - beta1) times the clipped gradient (within 1e-5, as ||a - b|| / ||b|| of each tensor);
  - a model trained by plait and exported with `plait export` loads in transformers and gives plait's
    `--eval` loss (within 1e-6).
It needs torch, transformers and safetensors (pip install torch transformers safetensors); without them
it says so in one line and exits 0. Usage: check.py BUILD_DIR [FAMILY...] (the folder holding plait, and
the families to check by their first word, GPT-2 Llama Gemma OLMo-2 Qwen2 Mistral Mistral-v0.2 Qwen3
Phi-2 GPT-NeoX GPT-J Falcon-7B Falcon-40B StableLM StarCoder2 Cohere StableLM-2 StableLM-2-12B
Mixtral Qwen2-MoE Qwen3-MoE OLMoE; all by default). The mixtures of experts run at one rank, pp 2,
tp 2, ep 2 (dp 2), ep 2 · tp 2 and pp 2 · ep 2 · dp 2, and a one-layer copy of each with its
load-balancing loss against transformers' (output_router_logits). Mistral-v0.2 (sliding_window null:
no window) is checked over windows of 4200 tokens, at one rank; Falcon-7B (one key/value head) at tp
4 too; Llama-kv2-tp8 and Falcon-7B-tp8 (eight query heads over two and one key/value heads) at tp 4
and tp 8.
"""
import json
import math
import os
import re
import struct
import subprocess
import sys
import tempfile

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

try:
    import numpy as np
    import torch
    import transformers
    from safetensors.torch import load_file
except ImportError as missing:
    print("interop-check: skipped, %s; pip install torch transformers safetensors to run it" % missing)
    sys.exit(0)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEQ = 32
LAYOUTS = {"one rank": [], "tp 2": ["--tp", "2"], "pp 2": ["--pp", "2"],
           "tp 2 · pp 2 · dp 2, sp": ["--tp", "2", "--pp", "2", "--dp", "2", "--sequence-parallel"],
           "tp 4": ["--tp", "4"], "tp 8": ["--tp", "8"],
           # expert parallelism: ep ranks carved out of the data-parallel ones
           "ep 2": ["--ep", "2", "--dp", "2"],
           "ep 2 · tp 2": ["--ep", "2", "--dp", "2", "--tp", "2"],
           "pp 2 · ep 2 · dp 2": ["--pp", "2", "--ep", "2", "--dp", "2"]}
EXPERT_LAYOUTS = ("tp 2", "ep 2", "ep 2 · tp 2", "pp 2 · ep 2 · dp 2")
# the mixtures of experts: one rank and pp 2 (nn.moe has tp = 1 only), then expert parallelism
MOE = ("one rank", "pp 2") + EXPERT_LAYOUTS
FOUR = ("one rank", "tp 2", "pp 2", "tp 2 · pp 2 · dp 2, sp")  # every family's layouts
BATCH = ["--mbs", "1", "--gbs", "4"]
BETA1 = float(np.float32(1) - np.float32(0.9))  # plait's (1 - beta1) in float, as the optimizer computes it


class Family:
    """A small configuration of one family: transformers' model and plait's model file with --set."""

    def __init__(self, name, model_class, model_file, config, sets, rotary, attention="sdpa",
                 masked=False, seq=SEQ, windows=8, layouts=FOUR, random_norms=False):
        self.name, self.model_class, self.model_file, self.config = name, model_class, model_file, config
        self.sets, self.rotary, self.attention = sets, rotary, attention  # attention: transformers' kernel
        self.masked = masked  # a masked-LM model: plait's masks (tests/tools/mlm_batch) fed to transformers
        # norms' weights and biases drawn at random rather than transformers' ones and zeros, so
        # that a norm per head read into the wrong head shows
        self.random_norms = random_norms
        # evaluated over `windows` windows of seq tokens and a short one, at the layouts named
        self.seq, self.windows, self.layouts = seq, windows, layouts


# the sizes of the families added last: transformers' keys and plait's --set
SMALL = dict(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
             max_position_embeddings=64)
SMALL_SETS = ["layers=2", "hidden=64", "heads=4", "seq=%d" % SEQ, "vocab=256"]

STABLELM2_SIZES = dict(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                       qk_layernorm=True)
STABLELM2_SETS = ["layers=2", "hidden=64", "heads=4", "kv_heads=2", "ffn=96", "seq=%d" % SEQ,
                  "vocab=256"]

MOE_SIZES = dict(SMALL, num_key_value_heads=2, num_experts_per_tok=2, rms_norm_eps=1e-5)
MOE_SETS = SMALL_SETS + ["kv_heads=2", "experts=4", "topk=2", "norm_eps=1e-5"]

FAMILIES = [
    Family("GPT-2", transformers.GPT2LMHeadModel, "models/gpt2.lua",
           transformers.GPT2Config(vocab_size=256, n_positions=64, n_embd=64, n_layer=2, n_head=4, n_inner=128,
                                   resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0),
           ["layers=2", "hidden=64", "heads=4", "ffn=128", "seq=%d" % SEQ, "vocab=256"], rotary=False),
    Family("Llama (GQA)", transformers.LlamaForCausalLM, "models/llama.lua",
           transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                    rms_norm_eps=1e-5, rope_theta=10000.0),
           ["layers=2", "hidden=64", "heads=4", "kv_heads=2", "ffn=96", "seq=%d" % SEQ, "vocab=256"], rotary=True),
    # two key/value heads for eight query heads at tp 4 and tp 8: each held by two or four ranks
    Family("Llama-kv2-tp8", transformers.LlamaForCausalLM, "models/llama.lua",
           transformers.LlamaConfig(**dict(SMALL, num_attention_heads=8), intermediate_size=96,
                                    num_key_value_heads=2, rms_norm_eps=1e-5, rope_theta=10000.0),
           SMALL_SETS[:2] + ["heads=8"] + SMALL_SETS[3:] + ["kv_heads=2", "ffn=96"], rotary=True,
           layouts=("one rank", "tp 4", "tp 8")),
    Family("Llama-3.1", transformers.LlamaForCausalLM, "models/llama.lua",
           transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                    rms_norm_eps=1e-5,
                                    rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                                     "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                     "original_max_position_embeddings": 16}),
           ["layers=2", "hidden=64", "heads=4", "kv_heads=2", "ffn=96", "seq=%d" % SEQ, "vocab=256",
            "rope_theta=500000", "rope_scaling=llama3", "rope_original_positions=16"], rotary=True),
    Family("Gemma", transformers.GemmaForCausalLM, "models/gemma.lua",
           transformers.GemmaConfig(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                                    max_position_embeddings=64, rms_norm_eps=1e-6),
           ["layers=2", "hidden=64", "heads=4", "kv_heads=2", "head_dim=32", "ffn=96", "seq=%d" % SEQ, "vocab=256"],
           rotary=True),
    Family("Gemma-2", transformers.Gemma2ForCausalLM, "models/gemma2.lua",
           transformers.Gemma2Config(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
                                     num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                     max_position_embeddings=64, rms_norm_eps=1e-6, query_pre_attn_scalar=24,
                                     sliding_window=12, attn_logit_softcapping=5.0, final_logit_softcapping=3.0),
           ["layers=4", "hidden=64", "heads=4", "kv_heads=2", "head_dim=16", "ffn=96", "seq=%d" % SEQ, "vocab=256",
            "query_pre_attn_scalar=24", "sliding_window=12", "attn_softcap=5", "logit_softcap=3"], rotary=True,
           attention="eager"),  # transformers' sdpa path does not cap scores
    Family("BERT", transformers.BertForMaskedLM, "models/bert.lua",
           transformers.BertConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=128, max_position_embeddings=64, hidden_dropout_prob=0.0,
                                   attention_probs_dropout_prob=0.0),
           ["layers=2", "hidden=64", "heads=4", "ffn=128", "seq=%d" % SEQ, "vocab=256"], rotary=False, masked=True),
    Family("OLMo-2", transformers.Olmo2ForCausalLM, "models/olmo2.lua",
           transformers.Olmo2Config(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                    rms_norm_eps=1e-6, rope_theta=500000.0),
           ["layers=2", "hidden=64", "heads=4", "kv_heads=2", "ffn=96", "seq=%d" % SEQ, "vocab=256"], rotary=True),
    Family("Qwen2", transformers.Qwen2ForCausalLM, "models/qwen2.lua",
           transformers.Qwen2Config(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                    rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=False),
           ["layers=2", "hidden=64", "heads=4", "kv_heads=2", "ffn=96", "seq=%d" % SEQ, "vocab=256"], rotary=True),
    Family("Mistral", transformers.MistralForCausalLM, "models/mistral.lua",
           transformers.MistralConfig(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                      max_position_embeddings=64, rms_norm_eps=1e-5, sliding_window=12),
           ["layers=2", "hidden=64", "heads=4", "kv_heads=2", "ffn=96", "seq=%d" % SEQ, "vocab=256",
            "sliding_window=12"], rotary=True),
    # Mistral v0.2's "sliding_window": null: no window, over more than 4096 positions
    Family("Mistral-v0.2", transformers.MistralForCausalLM, "models/mistral.lua",
           transformers.MistralConfig(vocab_size=256, hidden_size=16, intermediate_size=24,
                                      num_hidden_layers=1, num_attention_heads=2,
                                      num_key_value_heads=1, head_dim=8, rms_norm_eps=1e-5,
                                      max_position_embeddings=4224, sliding_window=None),
           ["layers=1", "hidden=16", "heads=2", "kv_heads=1", "ffn=24", "seq=4200", "vocab=256",
            "sliding_window=none"], rotary=True, seq=4200, windows=1, layouts=("one rank",)),
    Family("Qwen3", transformers.Qwen3ForCausalLM, "models/qwen3.lua",
           transformers.Qwen3Config(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                                    max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=1000000.0,
                                    tie_word_embeddings=False),
           ["layers=2", "hidden=64", "heads=4", "kv_heads=2", "head_dim=32", "ffn=96", "seq=%d" % SEQ, "vocab=256"],
           rotary=True),
    Family("Phi-2", transformers.PhiForCausalLM, "models/phi2.lua",
           transformers.PhiConfig(vocab_size=256, hidden_size=80, intermediate_size=160, num_hidden_layers=2,
                                  num_attention_heads=4, max_position_embeddings=64, partial_rotary_factor=0.4,
                                  resid_pdrop=0.0, embd_pdrop=0.0),
           ["layers=2", "hidden=80", "heads=4", "ffn=160", "seq=%d" % SEQ, "vocab=256"], rotary=True),
    Family("GPT-NeoX", transformers.GPTNeoXForCausalLM, "models/pythia.lua",
           transformers.GPTNeoXConfig(**SMALL, intermediate_size=128, rotary_pct=0.25,
                                      rotary_emb_base=20000.0, hidden_dropout=0.0,
                                      attention_dropout=0.0),
           SMALL_SETS + ["ffn=128", "rope_theta=20000"], rotary=True),
    Family("GPT-J", transformers.GPTJForCausalLM, "models/gptj.lua",
           transformers.GPTJConfig(vocab_size=256, n_positions=64, n_embd=64, n_layer=2, n_head=4,
                                   rotary_dim=8, n_inner=128, resid_pdrop=0.0, embd_pdrop=0.0,
                                   attn_pdrop=0.0),
           SMALL_SETS + ["ffn=128", "rotary=8"], rotary=True),
    # Falcon-7B's layout: one key/value head (multi-query), also at tp 4, each rank holding it
    Family("Falcon-7B", transformers.FalconForCausalLM, "models/falcon.lua",
           transformers.FalconConfig(**SMALL, multi_query=True),
           SMALL_SETS + ["kv_heads=1", "ffn=256"], rotary=True, layouts=FOUR + ("tp 4",)),
    # multi-query with eight query heads: the one key/value head held by every rank at tp 8
    Family("Falcon-7B-tp8", transformers.FalconForCausalLM, "models/falcon.lua",
           transformers.FalconConfig(**dict(SMALL, num_attention_heads=8), multi_query=True),
           SMALL_SETS[:2] + ["heads=8"] + SMALL_SETS[3:] + ["kv_heads=1", "ffn=256"], rotary=True,
           layouts=("one rank", "tp 4", "tp 8")),
    # the new decoder architecture (Falcon-40B's): two norms, grouped-query attention; with biases
    Family("Falcon-40B", transformers.FalconForCausalLM, "models/falcon.lua",
           transformers.FalconConfig(**SMALL, new_decoder_architecture=True, num_kv_heads=2,
                                     bias=True),
           SMALL_SETS + ["kv_heads=2", "ffn=256", "new_decoder_architecture=true", "bias=true"],
           rotary=True),
    Family("StableLM", transformers.StableLmForCausalLM, "models/stablelm.lua",
           transformers.StableLmConfig(**SMALL, intermediate_size=96, num_key_value_heads=2,
                                       partial_rotary_factor=0.25, use_qkv_bias=True),
           SMALL_SETS + ["kv_heads=2", "ffn=96", "qkv_bias=true"], rotary=True),
    Family("StarCoder2", transformers.Starcoder2ForCausalLM, "models/starcoder2.lua",
           transformers.Starcoder2Config(**SMALL, intermediate_size=128, num_key_value_heads=2,
                                         sliding_window=12, residual_dropout=0.0,
                                         embedding_dropout=0.0, bos_token_id=0, eos_token_id=0),
           SMALL_SETS + ["kv_heads=2", "ffn=128", "sliding_window=12", "rope_theta=10000"],
           rotary=True),
    Family("Cohere", transformers.CohereForCausalLM, "models/cohere.lua",
           transformers.CohereConfig(**SMALL, intermediate_size=96, num_key_value_heads=2,
                                     logit_scale=0.25, pad_token_id=0, bos_token_id=1,
                                     eos_token_id=2),
           SMALL_SETS + ["kv_heads=2", "ffn=96", "logit_scale=0.25", "rope_theta=500000"],
           rotary=True),
    # StableLM-2's layer norm per head of q and k (qk_layernorm), sequential block, q, k, v biases
    Family("StableLM-2", transformers.StableLmForCausalLM, "models/stablelm2.lua",
           transformers.StableLmConfig(**STABLELM2_SIZES, use_qkv_bias=True,
                                       use_parallel_residual=False),
           STABLELM2_SETS + ["parallel=false", "qkv_bias=true"], rotary=True, random_norms=True),
    # StableLM-2-12B's shape: the parallel block, no biases on q, k and v
    Family("StableLM-2-12B", transformers.StableLmForCausalLM, "models/stablelm2.lua",
           transformers.StableLmConfig(**STABLELM2_SIZES, use_qkv_bias=False,
                                       use_parallel_residual=True),
           STABLELM2_SETS, rotary=True, random_norms=True),
    # mixtures of experts: 4 experts, 2 a token; transformers' random router (std 0.02) leaves no
    # token's second and third scores within rounding of a tie
    Family("Mixtral", transformers.MixtralForCausalLM, "models/mixtral.lua",
           transformers.MixtralConfig(**MOE_SIZES, intermediate_size=96, num_local_experts=4),
           MOE_SETS + ["ffn=96"], rotary=True, layouts=MOE),
    # the shared expert and its sigmoid gate, q/k/v biases, the top 2 not renormalised
    Family("Qwen2-MoE", transformers.Qwen2MoeForCausalLM, "models/qwen2_moe.lua",
           transformers.Qwen2MoeConfig(**MOE_SIZES, intermediate_size=96, num_experts=4,
                                       moe_intermediate_size=32,
                                       shared_expert_intermediate_size=48),
           MOE_SETS + ["ffn=96", "expert_ffn=32", "shared_ffn=48", "rope_theta=10000"],
           rotary=True, layouts=MOE),
    # q and k normed per head (heads of 32 beside a hidden of 64), the top 2 renormalised
    Family("Qwen3-MoE", transformers.Qwen3MoeForCausalLM, "models/qwen3_moe.lua",
           transformers.Qwen3MoeConfig(**MOE_SIZES, intermediate_size=96, num_experts=4,
                                       moe_intermediate_size=32, head_dim=32,
                                       norm_topk_prob=True),
           MOE_SETS + ["ffn=96", "expert_ffn=32", "head_dim=32", "rope_theta=10000"],
           rotary=True, layouts=MOE),
    # q and k normed whole, the top 2 not renormalised
    Family("OLMoE", transformers.OlmoeForCausalLM, "models/olmoe.lua",
           transformers.OlmoeConfig(**MOE_SIZES, intermediate_size=96, num_experts=4,
                                    eos_token_id=0),
           MOE_SETS + ["ffn=96"], rotary=True, layouts=MOE),
]


def run(*args):
    done = subprocess.run([str(a) for a in args], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit("interop-check: %s failed:\n%s%s" % (" ".join(map(str, args)), done.stdout, done.stderr))
    return done.stdout


def token_file(path, tokens):
    header = [20240520, 1, len(tokens)] + [0] * 253
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header) + struct.pack("<%dH" % len(tokens), *tokens))


def json_lines(path):
    return [json.loads(line) for line in open(path)]


def plait_eval(train, ckpt_flag, ckpt, eval_bin, log):
    run(train, ckpt_flag, ckpt, "--eval", eval_bin, "--log-json", log)
    record = [r for r in json_lines(log) if "eval" in r][-1]
    return record["loss"], record["tokens"]


def rotary_in_double(model):
    """transformers' Llama-like models compute their rotary tables and their RMS norms in float32 even in a
    float64 model (GPT-J its sin and cos table, Cohere its layer norms and its rotation of q and k),
    Gemma keeps its embedding scale √hidden as a float32 number, and the eager attention (Gemma-2's)
    takes its softmax in float32, as do the mixtures of experts' routers (Mixtral's, Qwen's and
    OLMoE's softmax over the experts); plait's double build computes everything in double. For the
    float64 comparison these are computed in float64 here (the formulas as transformers writes them, in
    the input's dtype)."""
    def llama3(inv_freq, p):  # Llama 3.1's scaled frequencies, by wavelength
        low, high, old = p["low_freq_factor"], p["high_freq_factor"], p["original_max_position_embeddings"]
        wavelength = 2 * math.pi / inv_freq
        scaled = torch.where(wavelength > old / low, inv_freq / p["factor"], inv_freq)
        smooth = (old / wavelength - low) / (high - low)
        smoothed = (1 - smooth) * scaled / p["factor"] + smooth * scaled
        medium = (wavelength >= old / high) & (wavelength <= old / low)
        return torch.where(medium, smoothed, scaled)

    def rotary(self, x, position_ids):
        dim = self.inv_freq.shape[0] * 2
        params = self.config.rope_parameters
        inv_freq = 1.0 / (params["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
        if params.get("rope_type") == "llama3":
            inv_freq = llama3(inv_freq, params)
        freqs = position_ids[..., None].double() * inv_freq
        if type(self).__name__.startswith("Cohere"):  # interleaved pairs: each frequency twice
            emb = torch.repeat_interleave(freqs, 2, dim=-1)
        else:
            emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    def gptj_table(self):  # GPT-J's sin and cos table, in float64
        dim = self.pos_embd_dim
        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
        angles = torch.arange(self.max_positions, dtype=torch.float64)[:, None] * inv_freq
        self.embed_positions = torch.cat((torch.sin(angles), torch.cos(angles)), dim=1)

    def cohere_norm(self, x):  # a layer norm without bias, in the input's dtype
        centred = x - x.mean(-1, keepdim=True)
        variance = centred.pow(2).mean(-1, keepdim=True)
        return self.weight * (centred * torch.rsqrt(variance + self.variance_epsilon))

    def rms_norm(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.variance_epsilon))

    def router(self, x):  # the softmax over the experts, its top k, renormalised or not
        logits = torch.nn.functional.linear(x.reshape(-1, self.hidden_dim), self.weight)
        top, indices = torch.topk(torch.softmax(logits, dim=-1), self.top_k, dim=-1)
        if getattr(self, "norm_topk_prob", True):  # Mixtral's router always renormalises
            top = top / top.sum(dim=-1, keepdim=True)
        return logits, top, indices

    def gemma_norm(self, x):  # the norm alone, times 1 + weight
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1.0 + self.weight)

    module = sys.modules[type(model).__module__]
    eager = getattr(module, "eager_attention_forward", None)
    if eager is not None and not getattr(eager, "in_input_dtype", False):
        def eager_in_input_dtype(*args, **kwargs):  # the softmax in the scores' own dtype
            softmax = torch.nn.functional.softmax
            torch.nn.functional.softmax = lambda x, dim, dtype=None: softmax(x, dim=dim)
            try:
                return eager(*args, **kwargs)
            finally:
                torch.nn.functional.softmax = softmax
        eager_in_input_dtype.in_input_dtype = True
        module.eager_attention_forward = eager_in_input_dtype

    cohere = type(model).__name__.startswith("Cohere")
    if cohere and not getattr(module, "rotates_in_input_dtype", False):
        rotate_half = module.rotate_half  # interleaved pairs

        def rotate_in_input_dtype(q, k, cos, sin, unsqueeze_dim=1):  # Cohere's, without float32
            cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
            return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        module.apply_rotary_pos_emb = rotate_in_input_dtype
        module.rotates_in_input_dtype = True

    for module in model.modules():
        name = type(module).__name__
        if name.endswith("RMSNorm"):
            module.forward = (gemma_norm if name.startswith("Gemma") else rms_norm).__get__(module)
        elif name == "CohereLayerNorm":
            module.forward = cohere_norm.__get__(module)
        elif name.endswith("TopKRouter"):
            module.forward = router.__get__(module)
        elif name == "GPTJRotaryEmbedding":
            gptj_table(module)
        elif name.endswith("RotaryEmbedding"):
            module.forward = rotary.__get__(module)
    embed = getattr(getattr(model, "model", None), "embed_tokens", None)
    scale = getattr(embed, "embed_scale", None)
    if scale is not None:
        scale.fill_(model.config.hidden_size ** 0.5)


def hf_eval(model, tokens, seq):
    """The mean next-token loss over windows of seq tokens starting at 0, seq, 2·seq, ... (the last
    one shorter), every token but the first predicted once: what plait's --eval computes."""
    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(tokens) - 1, seq):
            window = tokens[start:start + seq + 1]
            ids = torch.tensor([window[:-1]])
            logits = model(ids).logits[0].double()
            total += torch.nn.functional.cross_entropy(logits, torch.tensor(window[1:]), reduction="sum").item()
            count += len(window) - 1
    return total / count, count


SEED, STEP_BATCH = 1234, 4  # the programs' default --seed; BATCH's --gbs


def mlm_batch(tools, *args):
    """plait's masked-LM inputs and targets (tests/tools/mlm_batch.c, built in `tools`): two lists."""
    lines = run(os.path.join(tools, "mlm_batch"), *args).split("\n")
    return [int(v) for v in lines[0].split()], [int(v) for v in lines[1].split()]


def hf_eval_masked(model, tools, eval_bin):
    """plait's masked-LM --eval in transformers: the file's positions masked as plait masks them, in
    windows of SEQ (the last padded with token 0, predicting nothing), the loss over every masked target."""
    inputs, targets = mlm_batch(tools, "eval", eval_bin, 256, SEED)
    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(inputs), SEQ):
            ids, labels = inputs[start:start + SEQ], targets[start:start + SEQ]
            ids, labels = ids + [0] * (SEQ - len(ids)), labels + [-1] * (SEQ - len(labels))
            logits = model(torch.tensor([ids])).logits[0].double()
            total += torch.nn.functional.cross_entropy(logits, torch.tensor(labels), ignore_index=-1,
                                                       reduction="sum").item()
            count += sum(t >= 0 for t in labels)
    return total / count, count


def relative(a, b):
    return abs(a - b) / abs(b)


def masked_step_loss(model, tools, step_bin):
    """The first step's loss of a masked-LM program: its global batch as plait draws it, the mean over
    every masked target of the batch."""
    inputs, targets = mlm_batch(tools, "train", step_bin, 256, SEED, 0, SEQ, STEP_BATCH)
    logits = model(torch.tensor(inputs).view(STEP_BATCH, SEQ)).logits.reshape(STEP_BATCH * SEQ, -1)
    return torch.nn.functional.cross_entropy(logits, torch.tensor(targets), ignore_index=-1)


# tensors transformers keeps under another name than its files give them (GPT-NeoX's output layer)
IN_MEMORY = {"embed_out.weight": "lm_head.weight"}
# an expert's matrix in the files (Mixtral's w1, w3, w2 under block_sparse_moe; the others'
# gate_proj, up_proj, down_proj under mlp), which transformers holds stacked in memory: each
# layer's mlp.experts.gate_up_proj [experts, 2·ffn, hidden] (gate, then up) and down_proj
EXPERT = re.compile(r"(.*)\.(?:block_sparse_moe|mlp)\.experts\.(\d+)\."
                    r"(w1|w3|w2|gate_proj|up_proj|down_proj)\.weight$")


def in_memory(grads, name):
    """The gradient of the files' tensor `name` among transformers' gradients by its own names."""
    expert = EXPERT.match(name)
    if expert is None:
        return grads[IN_MEMORY.get(name, name.replace(".block_sparse_moe.", ".mlp."))]
    layer, e, which = expert.group(1), int(expert.group(2)), expert.group(3)
    if which in ("w2", "down_proj"):
        return grads[layer + ".mlp.experts.down_proj"][e]
    gate_up = grads[layer + ".mlp.experts.gate_up_proj"][e]
    half = gate_up.shape[0] // 2
    return gate_up[:half] if which in ("w1", "gate_proj") else gate_up[half:]


def gradient_errors(model, tokens, seq, exported, loss=None):
    """The step's gradient in transformers (mean loss over the window, or the given loss; clipped at norm 1
    as plait clips) against plait's first moment, exported under transformers' names: the largest
    ||a - b|| / ||b||."""
    model.zero_grad()
    if loss is None:
        ids = torch.tensor([tokens[:seq]])
        targets = torch.tensor(tokens[1:seq + 1])
        loss = torch.nn.functional.cross_entropy(model(ids).logits[0], targets)
    else:
        loss = loss()
    loss.backward()
    grads = {n: p.grad.double() for n, p in model.named_parameters() if p.grad is not None}
    norm = math.sqrt(sum((g * g).sum().item() for g in grads.values()))
    coef = min(1.0, 1.0 / (norm + 1e-6))
    moments = load_file(os.path.join(exported, "model.safetensors"))
    worst, where = 0.0, ""
    # a tensor whose gradient is zero in exact arithmetic (BERT's key bias: softmax ignores a score added to
    # a whole row) is measured against a millionth of the whole clipped gradient instead of its own noise
    floor = 1e-6 * norm * coef
    for name, m in moments.items():
        # positions beyond the model's sequence have no place in plait
        g = in_memory(grads, name)[:m.shape[0]] * coef
        err = ((m.double() / BETA1 - g).norm() / max(g.norm().item(), floor)).item()
        if err > worst:
            worst, where = err, name
    return worst, where


def first_moment_checkpoint(src, dst):
    """A weights-only plait checkpoint whose weights are src's Adam first moments (for plait export)."""
    raw = open(src, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
    meta = header.pop("__metadata__")
    out, blobs, at = {}, [], 0
    for name, t in sorted(header.items()):
        if not name.startswith("adam.m."):
            continue
        blob = data[t["data_offsets"][0]:t["data_offsets"][1]]
        out[name[len("adam.m."):]] = {"dtype": t["dtype"], "shape": t["shape"], "data_offsets": [at, at + len(blob)]}
        blobs.append(blob)
        at += len(blob)
    # the checksums are of the weights, not of these moments: left out, the tensors read unchecked
    kept = {k: v for k, v in meta.items() if k not in ("step", "seed") and not k.startswith("checksum.")}
    out["__metadata__"] = kept | {"contents": "weights"}
    text = json.dumps(out).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(dst, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def lm_loss_alone(model, tokens):
    """A mixture of experts' loss in transformers is the language model's alone, as plait's, while
    output_router_logits is false (the auxiliary load-balancing loss is added only when asked)."""
    ids = torch.tensor([tokens])
    with torch.no_grad():
        out = model(ids, labels=ids)
        lm = torch.nn.functional.cross_entropy(out.logits[0, :-1], ids[0, 1:])
    assert not model.config.output_router_logits and out.aux_loss is None, model.config
    assert abs(out.loss.item() - lm.item()) <= 1e-6 * lm.item(), (out.loss.item(), lm.item())


def router_loss_check(fam, plait, d, step_tokens, router_results):
    """The load-balancing loss against transformers' (output_router_logits): a one-layer copy of the
    family, where transformers' f, pooled over the layers and summing to k, is k times Megatron's;
    plait's aux_loss = router_aux_loss_coef · k. The step's logged loss (cross entropy and the
    router's term, each microbatch the same window) against transformers' cross entropy plus
    router_aux_loss_coef times its aux_loss, in fp32."""
    coef, k = 0.02, fam.config.num_experts_per_tok
    config = fam.config.to_dict()
    config.update(num_hidden_layers=1, output_router_logits=True, router_aux_loss_coef=coef)
    if config.get("layer_types"):
        config["layer_types"] = config["layer_types"][:1]
    torch.manual_seed(4321)
    hf = fam.model_class(type(fam.config)(**config)).eval()
    one = os.path.join(d, "one-layer")
    hf.save_pretrained(one + ".hf")
    sets = ["--set"] + [v for v in fam.sets if not v.startswith("layers=")] + [
        "layers=1", "aux_loss=%r" % (coef * k)]
    run(plait, "import", fam.model_file, one + ".hf", "-o", one + ".imported", *sets)
    run(plait, "build", fam.model_file, *sets, *BATCH, "-o", one)
    step_bin, log = os.path.join(d, "step.bin"), one + ".json"
    run(os.path.join(one, "train"), "--init", one + ".imported", "--data", step_bin, "--steps", "1",
        "--log-json", log)
    ours = [r for r in json_lines(log) if "loss" in r and "eval" not in r][0]["loss"]
    ids = torch.tensor([step_tokens[:fam.seq + 1]])
    with torch.no_grad():
        out = hf(ids[:, :-1])  # every position's target, as plait's step (labels would drop one)
    router = coef * out.aux_loss.item()
    theirs = torch.nn.functional.cross_entropy(out.logits[0], ids[0, 1:]).item() + router
    router_results.append((fam.name, theirs, router, relative(ours, theirs)))


def check_family(fam, plait, tmp, text, results, router_results):
    eval_tokens = list(text[:fam.seq * fam.windows + 11])  # whole windows and a short one
    step_tokens = list(text[5000:5000 + fam.seq + 1])  # one window: each sample of the step
    d = os.path.join(tmp, fam.name.split()[0].lower().replace(".", ""))
    os.makedirs(d)
    torch.manual_seed(1234)
    model_class = fam.model_class
    hf = model_class(fam.config).eval()
    if fam.random_norms:
        with torch.no_grad():
            for name, p in hf.named_parameters():
                if "norm" in name:
                    p.copy_(torch.randn_like(p) * 0.1 + (1.0 if name.endswith("weight") else 0.0))
    hf.save_pretrained(os.path.join(d, "hf"))
    sets = ["--set"] + fam.sets
    run(plait, "import", fam.model_file, os.path.join(d, "hf"), "-o", os.path.join(d, "imported"), *sets)
    eval_bin, step_bin = os.path.join(d, "eval.bin"), os.path.join(d, "step.bin")
    token_file(eval_bin, eval_tokens)
    token_file(step_bin, step_tokens)
    tools = os.path.join(os.path.dirname(plait), "tools")

    def evaluate(model):  # transformers' loss on the file, as plait's --eval computes it
        if fam.masked:
            return hf_eval_masked(model, tools, eval_bin)
        return hf_eval(model, eval_tokens, fam.seq)

    step_loss = (lambda: masked_step_loss(hf, tools, step_bin)) if fam.masked else None
    want32, count = evaluate(hf)
    moe = any(v.startswith("experts=") for v in fam.sets)  # a mixture of experts
    # the experts one by one in float64 (transformers' grouped GEMM takes no float64)
    experts = {"experts_implementation": "eager"} if moe else {}
    hf64 = model_class.from_pretrained(os.path.join(d, "hf"), dtype=torch.float64,
                                       attn_implementation=fam.attention, **experts).eval()
    if fam.rotary:
        rotary_in_double(hf64)
    want64, _ = evaluate(hf64)
    if moe:
        lm_loss_alone(hf, eval_tokens[:fam.seq])
        router_loss_check(fam, plait, d, step_tokens, router_results)
    for layout in fam.layouts:
        flags = LAYOUTS[layout]
        tag = "".join(c for c in layout if c.isalnum())
        flags = flags + BATCH
        prog, prog64 = os.path.join(d, "f32-" + tag), os.path.join(d, "f64-" + tag)
        run(plait, "build", fam.model_file, *sets, *flags, "-o", prog)
        run(plait, "build", fam.model_file, *sets, *flags, "--double", "-o", prog64)
        loss32, tokens = plait_eval(os.path.join(prog, "train"), "--init", os.path.join(d, "imported"), eval_bin,
                                    os.path.join(d, tag + "-eval32.json"))
        loss64, _ = plait_eval(os.path.join(prog64, "train"), "--init", os.path.join(d, "imported"), eval_bin,
                               os.path.join(d, tag + "-eval64.json"))
        assert tokens == count, (tokens, count)
        # one step from the imported weights: Adam's first moment against transformers' gradient
        stepped = os.path.join(d, tag + "-stepped")
        run(os.path.join(prog, "train"), "--init", os.path.join(d, "imported"), "--data", step_bin, "--steps", "1",
            "--save", stepped)
        first_moment_checkpoint(os.path.join(stepped, "model.safetensors"), os.path.join(d, tag + "-moments"))
        run(plait, "export", fam.model_file, os.path.join(d, tag + "-moments"), "-o", os.path.join(d, tag + "-moments.hf"),
            *sets)
        hf.train()
        moments = os.path.join(d, tag + "-moments.hf")
        grad_err, grad_where = gradient_errors(hf, step_tokens, fam.seq, moments, step_loss)
        hf.eval()
        # a model trained by plait, exported, read by transformers
        trained = os.path.join(d, tag + "-trained")
        run(os.path.join(prog, "train"), "--init", os.path.join(d, "imported"), "--data", eval_bin, "--steps", "5",
            "--lr", "3e-3", "--save", trained)
        run(plait, "export", fam.model_file, trained, "-o", trained + ".hf", *sets)
        ours, _ = plait_eval(os.path.join(prog, "train"), "--load", trained, eval_bin, os.path.join(d, tag + "-t.json"))
        theirs, _ = evaluate(model_class.from_pretrained(trained + ".hf").eval())
        results.append((fam.name, layout, want32, relative(loss32, want32), relative(loss64, want64), grad_err,
                        grad_where, relative(theirs, ours)))


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    plait = os.path.join(ROOT, build, "plait")
    text = b"".join(open(os.path.join("/usr/share/common-licenses", f), "rb").read() for f in ("GPL-3", "Apache-2.0"))
    results, router_results = [], []
    with tempfile.TemporaryDirectory() as tmp:
        wanted = sys.argv[2:]  # names of families to check (all by default)
        for fam in FAMILIES:
            if not wanted or fam.name.split()[0] in wanted:
                check_family(fam, plait, tmp, text, results, router_results)
    limits = (1e-6, 1e-12, 1e-5, 1e-6)
    print("transformers %s, torch %s; %d tokens evaluated, windows of %d (Mistral-v0.2: 4210, 4200)"
          % (transformers.__version__, torch.__version__, SEQ * 8 + 10, SEQ))
    print("| model | layout | loss (transformers) | --eval fp32 | --eval --double | step's gradient | exported, "
          "trained |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    failed = 0
    for name, layout, loss, e32, e64, grad, where, exported in results:
        ok = e32 <= limits[0] and e64 <= limits[1] and grad <= limits[2] and exported <= limits[3]
        failed += not ok
        print("| %s | %s | %.6f | %.1e | %.1e | %.1e | %.1e |%s" % (name, layout, loss, e32, e64, grad, exported,
                                                                     "" if ok else " FAIL (worst " + where + ")"))
    print("relative differences; limits %.0e, %.0e, %.0e, %.0e" % limits)
    if router_results:
        print("| model, one layer | loss with the load-balancing loss (transformers) "
              "| of which the router's | the step's loss, fp32 |")
        print("| --- | --- | --- | --- |")
    for name, loss, router, e32 in router_results:
        failed += e32 > limits[0]
        print("| %s | %.6f | %.6f | %.1e |%s" % (name, loss, router, e32,
                                                 "" if e32 <= limits[0] else " FAIL"))
    print("interop-check: %s" % ("FAILED" if failed else "passed"))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
