// emu.cc: cuda/model.cu compiled for the host (emu.h), under the names of api.h.
// model_cu.h is a link to ../model.cu: go's build cache hashes the files in a
// package's directory, so through the link an edit of model.cu rebuilds this.
#define TRG_EMULATE 1
#include "api.h"
#include "model_cu.h"
