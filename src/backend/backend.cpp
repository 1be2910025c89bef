#include "ember/backend/backend.hpp"

#include "ember/ir/infer.hpp"

namespace ember::backend {

bool Backend::supports(const ir::Op& op) const { return ir::well_typed(op); }

}  // namespace ember::backend
