#include "fusion/elementwise_fuser.hpp"

namespace ember::fusion {

void run_records(Shared& shared, std::vector<Record>& records, backend::CloseReason) {
  for (Record& r : records) run_alone(shared, r);
}

}  // namespace ember::fusion
