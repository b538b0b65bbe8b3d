/*
 * _dlpack.h — the DLPack 1.0 ABI (the structs and constants jag's DLPack
 * exchange uses), written from the DLPack specification so that the
 * extension needs no extra dependency. Layouts match dlpack.h v1.0 exactly.
 */
#ifndef JAG_DLPACK_H
#define JAG_DLPACK_H

#include <stdint.h>

#define JAG_DLPACK_MAJOR 1
#define JAG_DLPACK_MINOR 0

/* DLManagedTensorVersioned.flags */
#define JAG_DLPACK_FLAG_READ_ONLY (UINT64_C(1) << 0)
#define JAG_DLPACK_FLAG_IS_COPIED (UINT64_C(1) << 1)

typedef struct {
    uint32_t major;
    uint32_t minor;
} jag_DLPackVersion;

/* DLDeviceType (only the values jag names) */
enum { jag_kDLCPU = 1, jag_kDLCUDA = 2, jag_kDLCUDAHost = 3 };

typedef struct {
    int device_type; /* a C enum in dlpack.h: int-sized */
    int32_t device_id;
} jag_DLDevice;

/* DLDataTypeCode */
enum { jag_kDLInt = 0, jag_kDLUInt = 1, jag_kDLFloat = 2, jag_kDLBfloat = 4, jag_kDLComplex = 5, jag_kDLBool = 6 };

typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} jag_DLDataType;

typedef struct {
    void *data;
    jag_DLDevice device;
    int32_t ndim;
    jag_DLDataType dtype;
    int64_t *shape;
    int64_t *strides; /* in elements; NULL: compact row-major (legacy) */
    uint64_t byte_offset;
} jag_DLTensor;

/* The legacy (pre-1.0) managed tensor, capsule name "dltensor". */
typedef struct jag_DLManagedTensor {
    jag_DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct jag_DLManagedTensor *self);
} jag_DLManagedTensor;

/* The versioned managed tensor (1.0), capsule name "dltensor_versioned". */
typedef struct jag_DLManagedTensorVersioned {
    jag_DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct jag_DLManagedTensorVersioned *self);
    uint64_t flags;
    jag_DLTensor dl_tensor;
} jag_DLManagedTensorVersioned;

#endif
