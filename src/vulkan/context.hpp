// The Vulkan device context: the logical device and its compute queue, a caching allocator
// of buffers, the command stream and the pipelines of generated kernels.
//
// Memory. Every tensor is a view of a Block: one VkBuffer bound to its own memory, from
// size classes (8 a power of two) that the allocator caches. Device-local memory where the
// device has it apart from the host, with host-visible staging buffers for the transfers;
// on an integrated device (lavapipe, whose device-local memory is host-visible) blocks are
// mapped and the transfers are plain copies. A block dropped while commands that use it
// are pending is reused only once they have completed (Note [Stream-ordered reuse]). An
// out-of-memory empties the cache and tries again, then raises an ember::Error naming the
// op and the VkResult; the device keeps working.
//
// Execution. Kernels are recorded into one open command buffer (a dispatch, then a global
// memory barrier) that is submitted with a fence every kMaxDispatches dispatches, at a read
// and at sync(): nothing but a read (download) or sync() waits for the device. A kernel's
// scalar arguments (sizes, strides, offsets, the op's parameters) go in a host-visible
// arena of 32-bit words bound at binding 0; its tensors are bindings 1.., pushed with
// VK_KHR_push_descriptor, so no descriptor pool is managed.
//
// Pipelines are keyed by the kernel's structural key (vulkan/codegen.hpp), compiled from
// GLSL with shaderc on first use and kept for the process; SPIR-V is also cached on disk
// (Note [Shader cache]).
#pragma once

#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ember/backend/backend.hpp"
#include "ember/backend/strided_view.hpp"
#include "vulkan/codegen.hpp"
#include "vulkan/instance.hpp"

namespace ember::vulkan {

class Context;

struct Memory {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  std::size_t size = 0;  // the size class
  std::byte* mapped = nullptr;
  bool host = false;  // a staging / argument buffer (host-visible memory)
};

// A buffer owned by tensors (or a batch); returned to the context's cache when dropped.
class Block {
 public:
  Block(Context* ctx, Memory m, std::size_t bytes = 0) : ctx_(ctx), mem_(m), bytes_(bytes) {}
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  ~Block();
  const Memory& mem() const { return mem_; }
  VkBuffer buffer() const { return mem_.buffer; }
  std::size_t bytes() const { return bytes_; }  // as requested (mem().size is its class)

 private:
  Context* ctx_;
  Memory mem_;
  std::size_t bytes_;
};

// A tensor of the Vulkan backend: a strided view (elements) of a block.
class VkTensor final : public ir::TensorNode {
 public:
  VkTensor(std::shared_ptr<Block> block, backend::StridedView v, DType dt)
      : ir::TensorNode(v.shape, dt),
        block(std::move(block)),
        strides(std::move(v.strides)),
        offset(v.offset) {}
  std::shared_ptr<Block> block;
  std::vector<std::int64_t> strides;
  std::int64_t offset = 0;
  backend::StridedView view() const { return {shape(), strides, offset}; }
  bool contiguous() const { return offset == 0 && backend::is_contiguous(shape(), strides); }
};

class Context {
 public:
  // Enables VK_NV_cooperative_matrix where the device has it (Features::coopmat).
  explicit Context(int index);
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // Every public call locks this (recursively: a block dropped inside a call returns).
  std::recursive_mutex& mutex() { return mu_; }

  const PhysicalDevice& physical() const { return pd_; }
  const Features& features() const { return pd_.features; }
  // The most bytes one binding may address (maxStorageBufferRange).
  std::size_t max_range() const { return pd_.props.limits.maxStorageBufferRange; }
  bool integrated() const { return integrated_; }

  // ---- memory ----
  // A block of at least `bytes` (at least 4) bytes; `what` names the op in errors.
  std::shared_ptr<Block> allocate(std::size_t bytes, const std::string& what, bool host = false);
  std::shared_ptr<VkTensor> empty(const Shape& shape, DType dt, const std::string& what);
  void release(const Memory& m);  // from ~Block
  backend::MemoryStats stats();
  void empty_cache();

  // ---- transfers ----
  // Copies host bytes into the block (asynchronously, through staging, on a discrete device).
  void upload(const Block& dst, const void* src, std::size_t bytes, const std::string& what);
  // Waits for the block's pending writes and copies its first `bytes` bytes out.
  void download(const Block& src, void* dst, std::size_t bytes, const std::string& what);

  // ---- kernels ----
  // Records spec's kernel over groups (x, y, z) workgroups with args at binding 0 and the
  // buffers at bindings 1...
  void dispatch(const KernelSpec& spec, const std::vector<std::int32_t>& args,
                const std::vector<const Block*>& buffers, std::uint32_t gx, std::uint32_t gy = 1,
                std::uint32_t gz = 1);
  // Workgroups of `local` threads covering n threads, as (x, y) within the device's limits.
  std::pair<std::uint32_t, std::uint32_t> groups_for(std::int64_t n, std::uint32_t local) const;
  void sync();  // submits and waits for everything recorded; raises the kernels' errors

  // Kernels compiled since the context was made (for tests of the cache).
  std::size_t pipelines_compiled() const { return compiled_; }

 private:
  struct Batch {
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    std::uint64_t serial = 0;
    int dispatches = 0;
    std::vector<std::shared_ptr<Block>> keep;  // staging and argument blocks it reads
  };
  struct Pipeline {
    VkPipeline pipeline = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
  };

  Memory allocate_memory(std::size_t size, bool host, const std::string& what);
  std::uint32_t memory_type(std::uint32_t bits, bool host) const;
  Batch& recording();
  void barrier(VkCommandBuffer cmd);
  void submit();
  void retire(bool wait_all);
  const Pipeline& pipeline(const KernelSpec& spec);
  std::string with_float_controls(const std::string& source) const;
  // Kernels that report errors (KernelSpec::reports_errors) bind the error word after their
  // tensors; what they report raises an ember::Error, naming the ops that could have, at
  // the next wait.
  void raise_errors();
  std::vector<std::uint32_t> compile(const std::string& key, const std::string& source);
  VkDescriptorSetLayout set_layout(int bindings);

  std::recursive_mutex mu_;
  PhysicalDevice pd_;
  bool integrated_ = false;
  std::uint32_t device_type_ = 0, host_type_ = 0;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkPipelineCache pipeline_cache_ = VK_NULL_HANDLE;
  PFN_vkCmdPushDescriptorSetKHR push_descriptors_ = nullptr;

  // Note [Stream-ordered reuse]: a released block waits in `pending_` tagged with the serial
  // of the last batch that may use it, and moves to `free_` once that batch completed.
  std::uint64_t next_serial_ = 1, completed_ = 0;
  std::deque<std::pair<std::uint64_t, Memory>> pending_;
  std::multimap<std::pair<bool, std::size_t>, Memory> free_;
  std::size_t in_use_ = 0, cached_ = 0, peak_ = 0;

  std::unique_ptr<Batch> open_;
  std::deque<Batch> inflight_;
  std::vector<Batch> spare_;
  std::shared_ptr<Block> arena_;
  std::size_t arena_used_ = 0;

  std::map<std::string, Pipeline> pipelines_;
  std::map<int, VkDescriptorSetLayout> set_layouts_;
  std::size_t compiled_ = 0;
  std::shared_ptr<Block> errors_;
  std::vector<std::string> checked_ops_;  // since the last wait
  std::string cache_dir_;
};

}  // namespace ember::vulkan
