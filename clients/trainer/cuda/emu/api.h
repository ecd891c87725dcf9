// api.h: model.cu's API under the names of its host emulation (trgemu_*), so
// that a binary can hold both the emulation and the real CUDA library.
#ifndef TRG_EMU_API_H
#define TRG_EMU_API_H

#define trg_model trgemu_model
#define trg_device_count trgemu_device_count
#define trg_device_memory trgemu_device_memory
#define trg_create trgemu_create
#define trg_destroy trgemu_destroy
#define trg_device_name trgemu_device_name
#define trg_last_error trgemu_last_error
#define trg_step trgemu_step
#define trg_join trgemu_join
#define trg_copy_peer trgemu_copy_peer
#define trg_tp_attach trgemu_tp_attach
#define trg_eval trgemu_eval
#define trg_activations trgemu_activations
#define trg_upload trgemu_upload
#define trg_download trgemu_download
#define trg_adamw trgemu_adamw
#define trg_copy trgemu_copy
#define trg_demo_generate trgemu_demo_generate
#define trg_demo_apply trgemu_demo_apply
#define trg_lookahead trgemu_lookahead
#define trg_loco_start trgemu_loco_start
#define trg_loco_generate trgemu_loco_generate
#define trg_loco_apply trgemu_loco_apply

#include "../trainer_cuda.h"

#endif
