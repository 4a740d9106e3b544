/* tests/unit/test_nvtx_glob.c — the nvtx: marker's glob (inject/nvtx_glob.c): a table of patterns
 * (literal, prefix, suffix and substring forms, '?', brackets, classes, escapes) each checked against
 * the expected answer and against glibc's fnmatch(p, s, 0) in the C.UTF-8 locale; '?' and brackets
 * take one UTF-8 character, not a byte; then 200000 random patterns and names over an alphabet of
 * metacharacters, ASCII and two- and three-byte characters, compared with fnmatch. */
#include "../../inject/nvtx_glob.h"
#include "check.h"

#include <fnmatch.h>
#include <locale.h>
#include <stdlib.h>
#include <string.h>

static int glob(const char *p, const char *s)
{
    sp_glob_t g;
    sp_glob_compile(&g, p);
    return sp_glob_match(&g, s);
}

static const struct {
    const char *pat, *name;
    int want;
} cases[] = {
    {"step", "step", 1}, {"step", "steps", 0}, {"", "", 1}, {"", "a", 0}, {"*", "", 1}, {"**", "x", 1},
    {"train*", "train_step", 1}, {"train*", "trai", 0}, {"*step", "train_step", 1}, {"*step", "step_", 0},
    {"*never_seen*", "range_12", 0}, {"*ep_*", "step_3", 1}, {"*a*b*", "xaxxbx", 1}, {"*a*b", "ab_b_", 0},
    {"st?p", "step", 1}, {"st?p", "stp", 0}, {"st?p", "st\xc3\xa9p", 1},
    {"?", "\xe2\x82\xac", 1}, {"??", "\xe2\x82\xac", 0}, {"*?", "\xf0\x9f\x98\x80", 1},
    {"step[0-9]", "step7", 1}, {"step[0-9]", "stepx", 0}, {"step[!0-9]", "stepx", 1}, {"step[^0-9]", "step3", 0},
    {"[]]", "]", 1}, {"[!]]", "]", 0}, {"[a-]", "-", 1}, {"[abc", "[abc", 1}, {"[abc", "a", 0},
    {"[[:digit:]]*", "4x", 1}, {"[[:alpha:]_]x", "_x", 1}, {"[[:upper:]]", "a", 0}, {"[[:bogus:]]", "a", 0},
    {"[\xc3\xa0-\xc3\xbf]", "\xc3\xa9", 1}, {"[\xc3\xa0-\xc3\xbf]", "e", 0}, {"[!a]", "\xc3\xa9", 1},
    {"a\\*b", "a*b", 1}, {"a\\*b", "axb", 0}, {"\\[x]", "[x]", 1}, {"[\\]]", "]", 1}, {"ab\\", "ab\\", 0},
    {"*[ab]?c*", "zzbqc", 1}, {"*[ab]?c*", "zzbc", 0}, {"a*[0-9]", "a_x_9", 1},
};

/* Random text over an alphabet that exercises the matcher (metacharacters only in patterns), in
 * UTF-8 (utf) and with each multi-byte character as one byte of the same order (byte: é -> 0xE9,
 * € -> 0xF0), for fnmatch in the C locale: there a character is a byte, so its answer on the byte
 * form is what matching UTF-8 characters should answer. (glibc's own fnmatch in C.UTF-8 lets '?'
 * take a byte of a character too: "??" matches "é"; the table above avoids those cases.) */
static void random_text(char *utf, char *byte, int pattern, unsigned *seed)
{
    static const char *const pat_alpha[] = {"a", "b", "-", "*", "?", "[", "]", "!", "\\", "\xc3\xa9",
                                            "\xe2\x82\xac", "[:digit:]", "1", "^"};
    static const char *const name_alpha[] = {"a", "b", "-", "]", "[", "1", "!", "\xc3\xa9", "\xe2\x82\xac", "*"};
    int len = rand_r(seed) % 8;
    utf[0] = byte[0] = 0;
    for (int i = 0; i < len; i++) {
        const char *t = pattern ? pat_alpha[rand_r(seed) % 14] : name_alpha[rand_r(seed) % 10];
        strcat(utf, t);
        strcat(byte, (unsigned char)t[0] == 0xc3 ? "\xe9" : (unsigned char)t[0] == 0xe2 ? "\xf0" : t);
    }
}

/* glibc answers "no match" for some patterns with a '[' never closed ("[*-" against "[-"), where
 * fnmatch's rule (an unclosed '[' is a plain character) says match: those are not compared. */
static int brackets_closed(const char *p)
{
    const char *open = strrchr(p, '[');
    return !open || strchr(open + 1, ']');
}

int main(void)
{
    int utf8 = setlocale(LC_ALL, "C.UTF-8") != NULL;
    CHECK(utf8, "the C.UTF-8 locale is available (fnmatch is compared in it)");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = glob(cases[i].pat, cases[i].name), ref = fnmatch(cases[i].pat, cases[i].name, 0) == 0;
        CHECK(got == cases[i].want, "glob(\"%s\", \"%s\") = %d, want %d", cases[i].pat, cases[i].name, got,
              cases[i].want);
        CHECK(!utf8 || ref == cases[i].want, "fnmatch(\"%s\", \"%s\") = %d disagrees with the table",
              cases[i].pat, cases[i].name, ref);
    }
    CHECK(!glob("??", "\xc3\xa9") && !glob("st??p", "st\xc3\xa9p") && glob("*\xc3\xa9?", "x\xc3\xa9\xc3\xa9"),
          "'?' takes a whole UTF-8 character, never a byte of one");
    unsigned seed = 12345;
    long differ = 0, matched = 0, compared = 0, n = 200000;
    char pat[128], name[128], bpat[128], bname[128];
    setlocale(LC_ALL, "C");
    for (long i = 0; i < n; i++) {
        random_text(pat, bpat, 1, &seed);
        random_text(name, bname, 0, &seed);
        if (!brackets_closed(bpat))
            continue;
        int got = glob(pat, name), ref = fnmatch(bpat, bname, 0) == 0;
        matched += ref;
        compared++;
        if (got != ref && differ++ < 5)
            printf("differs: glob(\"%s\", \"%s\") = %d, fnmatch %d\n", pat, name, got, ref);
    }
    CHECK(differ == 0, "%ld of %ld random patterns and names answered unlike fnmatch", differ, compared);
    CHECK(compared > n / 2 && matched > compared / 50, "the random cases are many and match often enough (%ld of %ld)",
          matched, compared);
    printf("test_nvtx_glob: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
