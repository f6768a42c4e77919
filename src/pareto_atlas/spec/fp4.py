"""The 4-bit floating-point weight formats (NVFP4, MXFP4): their block layouts, hence their bits per
weight, whether they quantize activations too, and on which cards they run natively.

Layouts:
- NVFP4 (NVIDIA, "Introducing NVFP4 for Efficient and Accurate Low-Precision Inference", NVIDIA
  technical blog, 2025-06, developer.nvidia.com/blog/introducing-nvfp4-for-efficient-and-accurate-
  low-precision-inference): E2M1 values, an FP8 E4M3 scale per block of 16 values and a second-level
  FP32 scale per tensor. NVIDIA's NVFP4 checkpoints (TensorRT Model Optimizer, e.g. its DeepSeek-R1-FP4)
  quantize the linear layers' weights and activations: W4A4, knob "NVFP4". The same weights served
  with 16-bit activations (llm-compressor's NVFP4A16 scheme; or an NVFP4 checkpoint on a card without
  FP4 tensor cores) are knob "NVFP4A16".
- MXFP4 (Open Compute Project, "OCP Microscaling Formats (MX) Specification" v1.0, 2023-09): E2M1
  values and an E8M0 (power-of-two) scale per block of 32. gpt-oss ships its experts this way, with
  16-bit activations (OpenAI's gpt-oss model card: "4.25 bits per parameter"): knob "MXFP4".

Where they run: FP4 tensor cores are Blackwell's (the blog's Figure 1, the smallest floating-point
type per generation: A100 0.3 / H100 1.9 (FP8) / B200 9 dense PFLOPS (FP4)); a hardware card says it
has them by an `fp4` entry in its tflops (spec/hardware.toml: B200 only). On any other GPU, vLLM serves both formats weight-only: "For GPUs that
lack FP4 hardware support, we can leverage the Marlin kernel for fast weight-only FP4 quantization"
(vllm-project/vllm vllm/model_executor/layers/quantization/utils/marlin_utils_fp4.py
@ 00d52e93333741b205e70acb9217a2849f173696; is_fp4_marlin_supported: compute capability >= 7.5;
group size 16 for NVFP4 scales, 32 for MXFP4), i.e. 16-bit compute over dequantized weights, as
W4A16. Its kernel cost on a card is fitted where published measurements exist (calibrate) and else
derived from the card's roofline (`sim*`), as for every format no anchor measured.

An assumption where it matters: weight-only formats compute at the 16-bit peak on the B200 too. vLLM
on Blackwell also has MXFP4 x MXFP8 MoE kernels (FlashInfer; vllm-project/vllm issue 35528), whose
prefill would run faster than this derivation; decode, bound by the weights' bytes, is not affected.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Fp4Layout:
    value_bits: int  # E2M1
    block: int  # values sharing one scale
    scale_bits: int  # E4M3 (NVFP4) or E8M0 (MXFP4)
    scale: str
    activations_fp4: bool  # W4A4: the GEMMs run on FP4 tensor cores, which the card must have

    @property
    def bits_per_weight(self) -> float:
        """Bits a weight takes with its block's scale (a per-tensor FP32 scale adds < 1e-6 bit)."""
        return self.value_bits + self.scale_bits / self.block


FP4 = {
    "NVFP4": Fp4Layout(4, 16, 8, "FP8 E4M3 per 16 values + FP32 per tensor", activations_fp4=True),
    "NVFP4A16": Fp4Layout(4, 16, 8, "FP8 E4M3 per 16 values + FP32 per tensor", activations_fp4=False),
    "MXFP4": Fp4Layout(4, 32, 8, "E8M0 per 32 values", activations_fp4=False),
}


def fp4_compute_dtype(weights: str, tflops: dict) -> str:
    """The dtype an FP4 format's matmuls run in on a card with these peaks: fp4 where the format
    quantizes activations and the card has FP4 tensor cores, else fp16 (weights dequantized)."""
    return "fp4" if FP4[weights].activations_fp4 and "fp4" in tflops else "fp16"


def fp4_unserved(weights: str, hw_name: str, tflops: dict) -> str:
    """Why a card cannot serve an FP4 format ("" where it can): W4A4 needs FP4 tensor cores."""
    if weights in FP4 and FP4[weights].activations_fp4 and "fp4" not in tflops:
        return (
            f"weights {weights}: FP4 activations need FP4 tensor cores, which {hw_name} lacks "
            f"(no fp4 in its tflops); NVFP4A16 serves the same weights with 16-bit activations"
        )
    return ""
