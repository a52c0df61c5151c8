// The crate's kernel headers with the prefix its types.rs gives an f32 sum (the NVR_OP_* values
// need only differ), for the probes that compile the crate's kernel sources themselves
// (lamport.cu, llpath.cu): include this, then the kernel file.
#pragma once
#define NVR_T float
#define NVR_ACC float
#define NVR_LOAD(x) ((NVR_ACC)(x))
#define NVR_STORE(a) ((NVR_T)(a))
#define NVR_IS_FLOAT 1
#define NVR_IS_SIGNED 0
#define NVR_OP_SUM 0
#define NVR_OP_PROD 1
#define NVR_OP_MIN 2
#define NVR_OP_MAX 3
#define NVR_OP_AND 4
#define NVR_OP_OR 5
#define NVR_OP_XOR 6
#define NVR_OP_AVG 7
#define NVR_OP_PREMULSUM 8
#define NVR_OP NVR_OP_SUM
#include "../../crates/nvshmem/src/kernels/ops.cuh"
#include "../../crates/nvshmem/src/kernels/common.cuh"
