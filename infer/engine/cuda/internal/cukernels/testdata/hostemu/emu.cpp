// emu.cpp: runs muser's kernels (muser.cu, all of them) on the host
// through simt.h, following a script that emu_test.go writes:
//
//   alloc <address> <bytes>      map memory at that address, filled with 0xFF
//   up <address> <file>          copy a file into it
//   launch <kernel> <gx> <gy> <gz> <bx> <by> <bz> <shared> <arg>…
//                                arg: p<hex address> | i<int32> | u<uint32> | f<hex float bits>
//   down <address> <bytes> <file>  copy memory out to a file
//
// Addresses are the "device addresses" the Go side chose; the memory is
// mapped there (MAP_FIXED_NOREPLACE), so that pointers stored in buffers
// (the attention's per-row cache addresses) are host pointers too.
#include <cstring>
#include "simt.h"

#include "../../muser.cu"

#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <sys/mman.h>
#include <tuple>
#include <utility>

namespace {

struct Arg {
	char kind;
	uint64_t v;
};

template <class T> T conv(const Arg& a) {
	if constexpr (std::is_pointer_v<T>) {
		return reinterpret_cast<T>(a.v);
	} else if constexpr (std::is_same_v<T, float>) {
		return __uint_as_float((uint32_t)a.v);
	} else {
		return (T)(int64_t)a.v;
	}
}

using Invoker = std::function<void(const std::vector<Arg>&)>;

template <class... A, size_t... I>
void invoke(void (*fn)(A...), const std::vector<Arg>& args, std::index_sequence<I...>) {
	fn(conv<A>(args[I])...);
}

template <class... A> Invoker wrap(void (*fn)(A...)) {
	return [fn](const std::vector<Arg>& args) {
		if (args.size() != sizeof...(A)) {
			std::fprintf(stderr, "emu: %zu arguments for %zu parameters\n", args.size(), sizeof...(A));
			std::exit(3);
		}
		invoke(fn, args, std::index_sequence_for<A...>{});
	};
}

#define K(name) {#name, wrap(name)}
#define KT(t) K(muser_mmq_##t), K(muser_mmv_##t), K(muser_embed_##t)
const std::map<std::string, Invoker> kernels = {
	K(muser_quant_q8_0), K(muser_quant_q8_k), K(muser_round_f16), K(muser_round_bf16),
	K(muser_rmsnorm), K(muser_add_rmsnorm), K(muser_rmsnorm_heads), K(muser_add), K(muser_add_bias),
	K(muser_silu_mul), K(muser_silu_mul_quant), K(muser_rope), K(muser_kv_store_f16), K(muser_kv_store_f32), K(muser_rope_kv_store),
	K(muser_attn_scores_f16), K(muser_attn_scores_f32), K(muser_attn_softmax_part), K(muser_attn_softmax8), K(muser_attn_wsum_f16), K(muser_attn_wsum_f32),
	K(muser_attn_wsum_rows_f16), K(muser_attn_wsum_rows_f32), K(muser_attn_wsum_parts), K(muser_rope_attn_f16), K(muser_rope_attn_f32), K(muser_attn_scores_rows_f16), K(muser_attn_scores_rows_f32),
	K(muser_test_exp32), K(muser_test_f32_bits), K(muser_test_small_tables), K(muser_test_softmax_weights),
	KT(q8_0), KT(q4_0), KT(q5_0), KT(q4_1), KT(q5_1), KT(q2_k), KT(q3_k), KT(q4_k), KT(q5_k), KT(q6_k), KT(nvfp4),
	K(muser_mmf_f32), K(muser_mmfv_f32), K(muser_embed_f32), K(muser_mmf_f16), K(muser_mmfv_f16), K(muser_embed_f16),
	K(muser_mmf_bf16), K(muser_mmfv_bf16), K(muser_embed_bf16),
};

[[noreturn]] void die(const std::string& msg) {
	std::fprintf(stderr, "emu: %s\n", msg.c_str());
	std::exit(3);
}

} // namespace

int main(int argc, char** argv) {
	if (argc != 2) die("usage: emu <script>");
	std::ifstream script(argv[1]);
	if (!script) die(std::string("cannot open ") + argv[1]);
	std::string line;
	while (std::getline(script, line)) {
		std::istringstream in(line);
		std::string op;
		in >> op;
		if (op == "alloc") {
			uint64_t addr, n;
			in >> std::hex >> addr >> std::dec >> n;
			const size_t len = (n + 4095) & ~(size_t)4095;
			void* p = mmap((void*)addr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
			if (p != (void*)addr) die("cannot map " + line);
			std::memset(p, 0xff, len);
		} else if (op == "up") {
			uint64_t addr;
			std::string file;
			in >> std::hex >> addr >> file;
			std::ifstream f(file, std::ios::binary);
			std::vector<char> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
			std::memcpy((void*)addr, b.data(), b.size());
		} else if (op == "down") {
			uint64_t addr, n;
			std::string file;
			in >> std::hex >> addr >> std::dec >> n >> file;
			std::ofstream f(file, std::ios::binary);
			f.write((const char*)addr, (std::streamsize)n);
			if (!f) die("cannot write " + file);
		} else if (op == "launch") {
			std::string name;
			dim3 g, b;
			unsigned shared;
			in >> name >> g.x >> g.y >> g.z >> b.x >> b.y >> b.z >> shared;
			auto k = kernels.find(name);
			if (k == kernels.end()) die("no kernel " + name);
			if (shared > sizeof muser_emu_dynamic_smem) die("too much dynamic shared memory: " + line);
			std::vector<Arg> args;
			std::string a;
			while (in >> a) {
				Arg x{a[0], 0};
				const std::string v = a.substr(1);
				switch (x.kind) {
				case 'p': case 'f': case 'u': x.v = std::stoull(v, nullptr, 16); break;
				case 'i': x.v = (uint64_t)(int64_t)std::stoll(v); break;
				default: die("bad argument " + a);
				}
				args.push_back(x);
			}
			// Bytes past the launch's dynamic shared memory hold a canary: a
			// kernel that writes there would be out of bounds on a GPU.
			unsigned char* smem = (unsigned char*)muser_emu_dynamic_smem;
			const size_t total = sizeof muser_emu_dynamic_smem;
			std::memset(smem + shared, 0xa5, total - shared);
			muser_emu_launch(g, b, [&] { k->second(args); });
			for (size_t i = shared; i < total; i++)
				if (smem[i] != 0xa5) die("kernel wrote past its " + std::to_string(shared) + " bytes of dynamic shared memory: " + line);
		} else if (!op.empty()) {
			die("bad line " + line);
		}
	}
	return 0;
}
