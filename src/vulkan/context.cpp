#include "vulkan/context.hpp"

#include <shaderc/shaderc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "ember/base/error.hpp"
#include "ember/base/hash.hpp"

namespace ember::vulkan {
namespace {

// Dispatches recorded before the open command buffer is submitted.
constexpr int kMaxDispatches = 128;
// Bytes of one argument arena.
constexpr std::size_t kArenaBytes = 64 * 1024;

// Size classes: 8 per power of two from 256 bytes, so a block wastes at most an eighth.
std::size_t size_class(std::size_t bytes) {
  const std::size_t b = std::max<std::size_t>(bytes, 256);
  const int shift = static_cast<int>(std::bit_width(b - 1)) - 3;
  const std::size_t step = std::size_t{1} << shift;
  return (b + step - 1) / step * step;
}

// Note [Shader cache]: compiled SPIR-V is kept in $EMBER_VULKAN_CACHE (or
// $XDG_CACHE_HOME/ember/vulkan, or ~/.cache/ember/vulkan), one file per kernel named by a
// hash of its GLSL and the compiler's version, written to a temporary and renamed so
// concurrent processes never read half a file. EMBER_VULKAN_CACHE=off turns it off; any
// failure to read or write it only costs a compile.
std::string cache_dir() {
  std::string dir;
  if (const char* e = std::getenv("EMBER_VULKAN_CACHE"); e && *e) {
    if (std::strcmp(e, "off") == 0) return "";
    dir = e;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    dir = std::string(x) + "/ember/vulkan";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    dir = std::string(h) + "/.cache/ember/vulkan";
  } else {
    return "";
  }
  // mkdir -p
  for (std::size_t p = 1; p <= dir.size(); ++p) {
    if (p == dir.size() || dir[p] == '/') ::mkdir(dir.substr(0, p).c_str(), 0755);
  }
  return dir;
}

}  // namespace

Block::~Block() { ctx_->release(mem_); }

Context::Context(int index) {
  const Instance& inst = instance();
  EMBER_CHECK(index >= 0 && index < static_cast<int>(inst.devices.size()),
              "Device::vulkan(" + std::to_string(index) + "): no such device");
  pd_ = inst.devices[static_cast<std::size_t>(index)];
  const std::string what = "Device::vulkan(" + std::to_string(index) + ")";

  // Memory types: device-local for tensors, host-visible coherent for staging and arguments.
  VkPhysicalDeviceMemoryProperties mp{};
  vkGetPhysicalDeviceMemoryProperties(pd_.handle, &mp);
  int dev = -1, host = -1, host_cached = -1;
  for (std::uint32_t t = 0; t < mp.memoryTypeCount; ++t) {
    const VkMemoryPropertyFlags f = mp.memoryTypes[t].propertyFlags;
    if (dev < 0 && (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)) dev = static_cast<int>(t);
    const VkMemoryPropertyFlags hv =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    if ((f & hv) == hv) {
      if (host < 0) host = static_cast<int>(t);
      if (host_cached < 0 && (f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT))
        host_cached = static_cast<int>(t);
    }
  }
  EMBER_CHECK(host >= 0, what + ": the device has no host-visible coherent memory");
  if (dev < 0) dev = host;
  host_type_ = static_cast<std::uint32_t>(host_cached >= 0 ? host_cached : host);
  device_type_ = static_cast<std::uint32_t>(dev);
  const VkMemoryPropertyFlags df = mp.memoryTypes[device_type_].propertyFlags;
  // Integrated (lavapipe, most laptops): device-local memory the host can map directly.
  integrated_ = pd_.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ||
                pd_.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
  const VkMemoryPropertyFlags hv =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  if (integrated_ && (df & hv) != hv) integrated_ = false;

  // The device, with every feature the kernels may use that it has.
  const Features& f = pd_.features;
  VkPhysicalDeviceShaderFloat16Int8Features f16i8{};
  f16i8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
  f16i8.shaderFloat16 = f.f16;
  f16i8.shaderInt8 = f.i8;
  VkPhysicalDevice8BitStorageFeatures s8{};
  s8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES;
  s8.storageBuffer8BitAccess = f.storage8;
  VkPhysicalDevice16BitStorageFeatures s16{};
  s16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  s16.storageBuffer16BitAccess = f.storage16;
  VkPhysicalDeviceFeatures2 f2{};
  f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  f2.features.shaderFloat64 = f.f64;
  f2.features.shaderInt64 = f.i64;
  f2.features.shaderInt16 = f.i16;
  f2.pNext = &s16;
  std::vector<const char*> exts = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
  void** tail = &s16.pNext;
  if (f.storage8) {
    if (device_has_extension(pd_.handle, VK_KHR_8BIT_STORAGE_EXTENSION_NAME))
      exts.push_back(VK_KHR_8BIT_STORAGE_EXTENSION_NAME);
    *tail = &s8;
    tail = &s8.pNext;
  }
  if (f.f16 || f.i8) {
    if (device_has_extension(pd_.handle, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME))
      exts.push_back(VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
    *tail = &f16i8;
    tail = &f16i8.pNext;
  }
  VkPhysicalDeviceCooperativeMatrixFeaturesNV cm{};
  cm.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
  if (f.coopmat) {
    cm.cooperativeMatrix = VK_TRUE;
    exts.push_back(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
    *tail = &cm;
    tail = &cm.pNext;
  }
  if ((f.preserve32 || f.preserve64) &&
      device_has_extension(pd_.handle, VK_KHR_SHADER_FLOAT_CONTROLS_EXTENSION_NAME))
    exts.push_back(VK_KHR_SHADER_FLOAT_CONTROLS_EXTENSION_NAME);
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qi{};
  qi.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  qi.queueFamilyIndex = pd_.queue_family;
  qi.queueCount = 1;
  qi.pQueuePriorities = &priority;
  VkDeviceCreateInfo di{};
  di.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  di.pNext = &f2;
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  di.enabledExtensionCount = static_cast<std::uint32_t>(exts.size());
  di.ppEnabledExtensionNames = exts.data();
  check(vkCreateDevice(pd_.handle, &di, nullptr, &device_), what.c_str(), "vkCreateDevice");
  vkGetDeviceQueue(device_, pd_.queue_family, 0, &queue_);
  push_descriptors_ = reinterpret_cast<PFN_vkCmdPushDescriptorSetKHR>(
      vkGetDeviceProcAddr(device_, "vkCmdPushDescriptorSetKHR"));
  EMBER_CHECK(push_descriptors_ != nullptr, what + ": vkCmdPushDescriptorSetKHR is missing");

  VkCommandPoolCreateInfo pi{};
  pi.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = pd_.queue_family;
  check(vkCreateCommandPool(device_, &pi, nullptr, &pool_), what.c_str(), "vkCreateCommandPool");
  VkPipelineCacheCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO;
  check(vkCreatePipelineCache(device_, &ci, nullptr, &pipeline_cache_), what.c_str(),
        "vkCreatePipelineCache");
  cache_dir_ = cache_dir();
  errors_ = allocate(16, what, /*host=*/true);
  std::memset(errors_->mem().mapped, 0, 16);
}

void Context::raise_errors() {
  if (checked_ops_.empty()) return;
  std::vector<std::string> ops;
  ops.swap(checked_ops_);
  volatile std::int32_t* word = reinterpret_cast<std::int32_t*>(errors_->mem().mapped);
  const std::int32_t code = *word;
  if (code == 0) return;
  *word = 0;
  std::string names;
  for (const auto& o : ops) {
    if (names.find(o) == std::string::npos) names += (names.empty() ? "" : ", ") + o;
  }
  if (code == kErrorIndex) {
    const std::int64_t v = static_cast<std::int64_t>(
        (static_cast<std::uint64_t>(static_cast<std::uint32_t>(word[2])) << 32) |
        static_cast<std::uint32_t>(word[1]));
    fail(names + ": index " + std::to_string(v) +
         " is out of range for the indexed dim (detected on the Vulkan device " +
         pd_.props.deviceName + ")");
  }
  fail(names + ": integer division by zero (detected on the Vulkan device " + pd_.props.deviceName +
       ")");
}

// ---- memory ----

std::uint32_t Context::memory_type(std::uint32_t bits, bool host) const {
  const std::uint32_t want = host ? host_type_ : device_type_;
  if (bits & (1u << want)) return want;
  // The buffer cannot live in the preferred type: the first allowed one.
  return static_cast<std::uint32_t>(std::countr_zero(bits));
}

Memory Context::allocate_memory(std::size_t size, bool host, const std::string& what) {
  EMBER_CHECK(size <= pd_.max_allocation, what + ": " + std::to_string(size) +
                                              " bytes exceed the largest allocation of " +
                                              pd_.props.deviceName + " (maxMemoryAllocationSize " +
                                              std::to_string(pd_.max_allocation) + " bytes)");
  Memory m;
  m.size = size;
  m.host = host;
  VkBufferCreateInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  bi.size = size;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
             VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(vkCreateBuffer(device_, &bi, nullptr, &m.buffer), what.c_str(), "vkCreateBuffer");
  VkMemoryRequirements req{};
  vkGetBufferMemoryRequirements(device_, m.buffer, &req);
  VkMemoryAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = memory_type(req.memoryTypeBits, host);
  VkResult r = vkAllocateMemory(device_, &ai, nullptr, &m.memory);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) {
    // Give back what the cache holds (after the work that may still use it) and try again.
    submit();
    retire(true);
    empty_cache();
    r = vkAllocateMemory(device_, &ai, nullptr, &m.memory);
  }
  if (r != VK_SUCCESS) {
    vkDestroyBuffer(device_, m.buffer, nullptr);
    fail(what + ": out of memory on " + pd_.props.deviceName + " allocating " +
         std::to_string(size) + " bytes (vkAllocateMemory failed with " + result_name(r) + ")");
  }
  r = vkBindBufferMemory(device_, m.buffer, m.memory, 0);
  if (r == VK_SUCCESS && (host || integrated_)) {
    void* p = nullptr;
    r = vkMapMemory(device_, m.memory, 0, VK_WHOLE_SIZE, 0, &p);
    m.mapped = static_cast<std::byte*>(p);
  }
  if (r != VK_SUCCESS) {
    vkDestroyBuffer(device_, m.buffer, nullptr);
    vkFreeMemory(device_, m.memory, nullptr);
    check(r, what.c_str(), "vkBindBufferMemory / vkMapMemory");
  }
  return m;
}

std::shared_ptr<Block> Context::allocate(std::size_t bytes, const std::string& what, bool host) {
  std::lock_guard lk(mu_);
  const std::size_t size = size_class(bytes);
  retire(false);
  Memory m;
  auto it = free_.find({host, size});
  if (it != free_.end()) {
    m = it->second;
    free_.erase(it);
    cached_ -= size;
  } else {
    m = allocate_memory(size, host, what);
  }
  in_use_ += size;
  peak_ = std::max(peak_, in_use_);
  return std::make_shared<Block>(this, m, bytes);
}

std::shared_ptr<VkTensor> Context::empty(const Shape& shape, DType dt, const std::string& what) {
  const std::size_t bytes = shape.num_elements() * size_of(dt);
  auto block = allocate(bytes, what);
  return std::make_shared<VkTensor>(
      std::move(block), backend::StridedView{shape, backend::contiguous_strides(shape), 0}, dt);
}

// Note [Stream-ordered reuse]: every command that may use the block was recorded in the open
// batch or in one submitted before it, so it may be reused once that batch has completed.
void Context::release(const Memory& m) {
  std::lock_guard lk(mu_);
  in_use_ -= m.size;
  cached_ += m.size;
  const std::uint64_t last = open_ ? open_->serial : next_serial_ - 1;
  if (last <= completed_) {
    free_.insert({{m.host, m.size}, m});
  } else {
    pending_.push_back({last, m});
  }
}

backend::MemoryStats Context::stats() {
  std::lock_guard lk(mu_);
  backend::MemoryStats s;
  s.in_use = in_use_;
  s.reserved = in_use_ + cached_;
  s.peak = peak_;
  s.capacity = pd_.max_allocation;
  return s;
}

void Context::empty_cache() {
  std::lock_guard lk(mu_);
  retire(false);
  for (auto& [k, m] : free_) {
    vkDestroyBuffer(device_, m.buffer, nullptr);
    vkFreeMemory(device_, m.memory, nullptr);
    cached_ -= m.size;
  }
  free_.clear();
}

// ---- the command stream ----

Context::Batch& Context::recording() {
  if (open_) return *open_;
  Batch b;
  if (!spare_.empty()) {
    b = std::move(spare_.back());
    spare_.pop_back();
    check(vkResetCommandBuffer(b.cmd, 0), "Vulkan", "vkResetCommandBuffer");
    check(vkResetFences(device_, 1, &b.fence), "Vulkan", "vkResetFences");
  } else {
    VkCommandBufferAllocateInfo ai{};
    ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    ai.commandPool = pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    check(vkAllocateCommandBuffers(device_, &ai, &b.cmd), "Vulkan", "vkAllocateCommandBuffers");
    VkFenceCreateInfo fi{};
    fi.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
    check(vkCreateFence(device_, &fi, nullptr, &b.fence), "Vulkan", "vkCreateFence");
  }
  b.serial = next_serial_++;
  b.dispatches = 0;
  VkCommandBufferBeginInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(vkBeginCommandBuffer(b.cmd, &bi), "Vulkan", "vkBeginCommandBuffer");
  open_ = std::make_unique<Batch>(std::move(b));
  return *open_;
}

// Everything before (shader and transfer writes) is visible to everything after (shader,
// transfer and host reads).
void Context::barrier(VkCommandBuffer cmd) {
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                     VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                     VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                           VK_PIPELINE_STAGE_HOST_BIT,
                       0, 1, &mb, 0, nullptr, 0, nullptr);
}

void Context::submit() {
  if (!open_) return;
  Batch b = std::move(*open_);
  open_.reset();
  if (arena_) {
    b.keep.push_back(std::move(arena_));
    arena_used_ = 0;
  }
  check(vkEndCommandBuffer(b.cmd), "Vulkan", "vkEndCommandBuffer");
  VkSubmitInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &b.cmd;
  const VkResult r = vkQueueSubmit(queue_, 1, &si, b.fence);
  if (r != VK_SUCCESS) {
    completed_ = std::max(completed_, b.serial);  // nothing of it will run
    check(r, "Vulkan", "vkQueueSubmit");
  }
  inflight_.push_back(std::move(b));
}

// Retires completed batches (all of them, waiting, when wait_all), releasing what they kept
// and the blocks whose last use they were.
void Context::retire(bool wait_all) {
  while (!inflight_.empty()) {
    Batch& b = inflight_.front();
    if (wait_all) {
      const VkResult r = vkWaitForFences(device_, 1, &b.fence, VK_TRUE, UINT64_MAX);
      if (r != VK_SUCCESS) {
        check(r, "Vulkan: waiting for the device", "vkWaitForFences");
      }
    } else if (vkGetFenceStatus(device_, b.fence) != VK_SUCCESS) {
      break;
    }
    completed_ = b.serial;
    Batch done = std::move(b);
    inflight_.pop_front();
    done.keep.clear();  // may release blocks (recursive lock)
    spare_.push_back(std::move(done));
  }
  while (!pending_.empty() && pending_.front().first <= completed_) {
    const Memory m = pending_.front().second;
    pending_.pop_front();
    free_.insert({{m.host, m.size}, m});
  }
}

void Context::sync() {
  std::lock_guard lk(mu_);
  submit();
  retire(true);
  raise_errors();
}

std::pair<std::uint32_t, std::uint32_t> Context::groups_for(std::int64_t n,
                                                            std::uint32_t local) const {
  const std::int64_t groups = (n + local - 1) / local;
  const std::int64_t max_x = pd_.props.limits.maxComputeWorkGroupCount[0];
  if (groups <= max_x) return {static_cast<std::uint32_t>(std::max<std::int64_t>(groups, 1)), 1};
  const std::int64_t y = (groups + max_x - 1) / max_x;
  return {static_cast<std::uint32_t>((groups + y - 1) / y), static_cast<std::uint32_t>(y)};
}

// ---- transfers ----

void Context::upload(const Block& dst, const void* src, std::size_t bytes,
                     const std::string& what) {
  if (bytes == 0) return;
  std::lock_guard lk(mu_);
  if (dst.mem().mapped) {
    // A fresh block: no pending command uses it (Note [Stream-ordered reuse]).
    std::memcpy(dst.mem().mapped, src, bytes);
    return;
  }
  auto staging = allocate(bytes, what, /*host=*/true);
  std::memcpy(staging->mem().mapped, src, bytes);
  Batch& b = recording();
  VkBufferCopy region{0, 0, bytes};
  vkCmdCopyBuffer(b.cmd, staging->buffer(), dst.buffer(), 1, &region);
  barrier(b.cmd);
  b.keep.push_back(std::move(staging));
}

void Context::download(const Block& src, void* dst, std::size_t bytes, const std::string& what) {
  std::lock_guard lk(mu_);
  if (bytes == 0) {
    sync();
    return;
  }
  if (src.mem().mapped) {
    sync();
    std::memcpy(dst, src.mem().mapped, bytes);
    return;
  }
  auto staging = allocate(bytes, what, /*host=*/true);
  Batch& b = recording();
  VkBufferCopy region{0, 0, bytes};
  vkCmdCopyBuffer(b.cmd, src.buffer(), staging->buffer(), 1, &region);
  barrier(b.cmd);
  sync();
  std::memcpy(dst, staging->mem().mapped, bytes);
}

// ---- kernels ----

VkDescriptorSetLayout Context::set_layout(int bindings) {
  auto it = set_layouts_.find(bindings);
  if (it != set_layouts_.end()) return it->second;
  std::vector<VkDescriptorSetLayoutBinding> bs(static_cast<std::size_t>(bindings));
  for (int i = 0; i < bindings; ++i) {
    auto& b = bs[static_cast<std::size_t>(i)];
    b.binding = static_cast<std::uint32_t>(i);
    b.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    b.descriptorCount = 1;
    b.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo li{};
  li.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  li.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
  li.bindingCount = static_cast<std::uint32_t>(bindings);
  li.pBindings = bs.data();
  VkDescriptorSetLayout layout = VK_NULL_HANDLE;
  check(vkCreateDescriptorSetLayout(device_, &li, nullptr, &layout), "Vulkan",
        "vkCreateDescriptorSetLayout");
  set_layouts_[bindings] = layout;
  return layout;
}

// The kernel with SignedZeroInfNanPreserve for 32- and 64-bit floats, where the device has
// it: otherwise the driver may fold x + 0 to x, or assume no NaN. Every kernel declares the
// same modes, whatever widths it uses: Mesa compiles f32 arithmetic differently in a kernel
// that also declares the f64 mode (tanh differs in the last bit), and a fused kernel that
// casts from f64 must compute its f32 instructions as the unfused f32 kernels do.
std::string Context::with_float_controls(const std::string& source) const {
  if (tuned("nofloatcontrols")) return source;
  std::string modes;
  const auto mode = [&](int bits) {
    modes +=
        "spirv_execution_mode(extensions = [\"SPV_KHR_float_controls\"], capabilities = "
        "[4466], 4461, " +
        std::to_string(bits) + ");\n";
  };
  if (pd_.features.preserve32) mode(32);
  if (pd_.features.preserve64) mode(64);
  if (modes.empty()) return source;
  const std::size_t eol = source.find('\n');  // after #version
  return source.substr(0, eol + 1) + "#extension GL_EXT_spirv_intrinsics : require\n" + modes +
         source.substr(eol + 1);
}

std::vector<std::uint32_t> Context::compile(const std::string& key, const std::string& source) {
  std::string file;
  if (!cache_dir_.empty()) {
    char name[32];
    std::snprintf(name, sizeof name, "%016llx.spv",
                  static_cast<unsigned long long>(hash_bytes(source + "\nshaderc-vulkan1.1")));
    file = cache_dir_ + "/" + name;
    std::ifstream in(file, std::ios::binary);
    if (in) {
      std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
      if (!bytes.empty() && bytes.size() % 4 == 0) {
        std::vector<std::uint32_t> words(bytes.size() / 4);
        std::memcpy(words.data(), bytes.data(), bytes.size());
        if (words[0] == 0x07230203u) return words;  // SPIR-V's magic number
      }
    }
  }
  static shaderc_compiler_t compiler = shaderc_compiler_initialize();
  shaderc_compile_options_t opts = shaderc_compile_options_initialize();
  shaderc_compile_options_set_target_env(opts, shaderc_target_env_vulkan,
                                         shaderc_env_version_vulkan_1_1);
  shaderc_compile_options_set_optimization_level(opts, shaderc_optimization_level_zero);
  shaderc_compilation_result_t r = shaderc_compile_into_spv(
      compiler, source.data(), source.size(), shaderc_compute_shader, key.c_str(), "main", opts);
  shaderc_compile_options_release(opts);
  if (shaderc_result_get_compilation_status(r) != shaderc_compilation_status_success) {
    const std::string msg = shaderc_result_get_error_message(r);
    shaderc_result_release(r);
    fail("Vulkan: the generated kernel " + key + " does not compile: " + msg);
  }
  std::vector<std::uint32_t> words(shaderc_result_get_length(r) / 4);
  std::memcpy(words.data(), shaderc_result_get_bytes(r), words.size() * 4);
  shaderc_result_release(r);
  if (!file.empty()) {
    const std::string tmp = file + "." + std::to_string(::getpid()) + ".tmp";
    std::ofstream out(tmp, std::ios::binary);
    out.write(reinterpret_cast<const char*>(words.data()),
              static_cast<std::streamsize>(words.size() * 4));
    out.close();
    if (out) {
      std::rename(tmp.c_str(), file.c_str());
    } else {
      std::remove(tmp.c_str());
    }
  }
  return words;
}

const Context::Pipeline& Context::pipeline(const KernelSpec& spec) {
  const std::string key = spec.key();
  auto it = pipelines_.find(key);
  if (it != pipelines_.end()) return it->second;
  const std::vector<std::uint32_t> spirv = compile(key, with_float_controls(spec.source()));
  VkShaderModuleCreateInfo mi{};
  mi.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  mi.codeSize = spirv.size() * 4;
  mi.pCode = spirv.data();
  VkShaderModule module = VK_NULL_HANDLE;
  check(vkCreateShaderModule(device_, &mi, nullptr, &module), key.c_str(), "vkCreateShaderModule");
  Pipeline p;
  VkDescriptorSetLayout sl = set_layout(1 + spec.buffers());
  VkPipelineLayoutCreateInfo li{};
  li.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  li.setLayoutCount = 1;
  li.pSetLayouts = &sl;
  check(vkCreatePipelineLayout(device_, &li, nullptr, &p.layout), key.c_str(),
        "vkCreatePipelineLayout");
  VkComputePipelineCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module;
  ci.stage.pName = "main";
  ci.layout = p.layout;
  const VkResult r =
      vkCreateComputePipelines(device_, pipeline_cache_, 1, &ci, nullptr, &p.pipeline);
  vkDestroyShaderModule(device_, module, nullptr);
  check(r, key.c_str(), "vkCreateComputePipelines");
  ++compiled_;
  return pipelines_.emplace(key, p).first->second;
}

void Context::dispatch(const KernelSpec& spec, const std::vector<std::int32_t>& args,
                       const std::vector<const Block*>& buffers, std::uint32_t gx, std::uint32_t gy,
                       std::uint32_t gz) {
  std::lock_guard lk(mu_);
  std::vector<const Block*> bound = buffers;
  if (spec.reports_errors()) {
    bound.push_back(errors_.get());
    for (std::string& op : spec.checked_ops()) checked_ops_.push_back(std::move(op));
  }
  EMBER_ASSERT(static_cast<int>(bound.size()) == spec.buffers());
  const Pipeline& p = pipeline(spec);
  // The arguments, in the arena (a fresh one when it is full).
  const std::size_t align =
      std::max<std::size_t>(pd_.props.limits.minStorageBufferOffsetAlignment, 16);
  // One word more than the arguments: a 0 that the kernels read as a zero the compiler
  // cannot fold (EM_ZERO in codegen.cpp).
  const std::size_t bytes = (args.size() + 1) * 4;
  std::size_t at = (arena_used_ + align - 1) / align * align;
  Batch& b = recording();
  if (!arena_ || at + bytes > arena_->mem().size) {
    if (arena_) b.keep.push_back(std::move(arena_));
    arena_ = allocate(std::max(kArenaBytes, bytes), spec.key(), /*host=*/true);
    at = 0;
  }
  if (!args.empty()) std::memcpy(arena_->mem().mapped + at, args.data(), args.size() * 4);
  std::memset(arena_->mem().mapped + at + args.size() * 4, 0, 4);
  arena_used_ = at + bytes;

  std::vector<VkDescriptorBufferInfo> infos(bound.size() + 1);
  infos[0] = {arena_->buffer(), at, bytes};
  for (std::size_t i = 0; i < bound.size(); ++i)
    infos[i + 1] = {bound[i]->buffer(), 0, VK_WHOLE_SIZE};
  std::vector<VkWriteDescriptorSet> writes(infos.size());
  for (std::size_t i = 0; i < infos.size(); ++i) {
    auto& w = writes[i];
    w.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    w.dstBinding = static_cast<std::uint32_t>(i);
    w.descriptorCount = 1;
    w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    w.pBufferInfo = &infos[i];
  }
  vkCmdBindPipeline(b.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  push_descriptors_(b.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0,
                    static_cast<std::uint32_t>(writes.size()), writes.data());
  vkCmdDispatch(b.cmd, gx, gy, gz);
  barrier(b.cmd);
  if (++b.dispatches >= kMaxDispatches) submit();
}

}  // namespace ember::vulkan
