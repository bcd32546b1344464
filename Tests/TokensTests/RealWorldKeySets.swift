/// Key set documents shaped like the ones Google and Apple serve (moduli generated for these tests with openssl).
enum RealWorldKeySets {
    static let googleModulus1 =
        "3o3ROCJJ9ol9a-Gd9IOr-Ch4UVHC4y0UgqcEyiYrB-6oRz5ripgd544wZ3D63beqLd9Az_MKniBgS7nmcXgcWj31dPdDhn8uQydq"
        + "fKCKbZSBctiIAIPYzH8HwF88C4kOXylv6Ns235m5izelWti87YEmO2oscc2SOT1aS5F8gxHjh9MF-CTw9r5WduNmEDldr336YwAu"
        + "EW8RGmpRy6gflx45T-yuKaLjw47VMx00hqhPACrhpnDQQ-3Zmbbh-R3hZ8U5bUKlE8fulN6tIxcipwbn-AlUiY6LDIUwjG7siNcM"
        + "X6syiuAjKlidjfNglmdNTMkd6myJikPo97la-43tIQ"
    static let googleModulus2 =
        "nVvRuJQDxyuwtD2w7EeMjAQ5ey4Rn1jCvdbjjtkwKMVXtniN8VPaDKkqaPhVHlyoJA0F6CPiu4Z_dVUQLv6zM5F7O4E-hxFurh93"
        + "eGGEHBFFTkHorI_r6lAenrt_A-k5o7GC9KcjrhapbBhr4SeBI-EzEBuoVroeLP7AexLcZRW9NSPMM34SJIOVgyXlezWNl2AnUXtw"
        + "vn0fvkSk5ry_wgb0dzovbIMaS2D3SxMRe_a8JNYOL3qd80t_GAkbtmE9Af2UktX8PJG29N_p1OyFkwPakkdQ-BgUzHNXX74mPJ6G"
        + "TDUMOBipnAlsU5fYiv8qctD56nUf00uR5c-L0Q_BCQ"
    static let appleModulus =
        "xdnC0YFwDQrKHDkfseVmCNQs_v0aZlBXgZIc25Sj_ZX2Tel2FIAwQ8UNttH8m74V2oB7jn8tQpVha7ZjUpk9eWJ2_f1pnbbYD-02"
        + "WzAc9MNnhSE9p34U9n73pymKlQW4qjlhgn-MXBiHMv1t3cSDdMEtS__LWFGn-VJB_U5oTdVrFWdg5_ojS4mcJryiBHceAHtCJvYv"
        + "h_waJARXj3OitUOOBIz64vLgS2DKvKFgo3AmzjA76hhfHsTdBN3MyhpLYi4Ub7VPnZgUvqGevRhZjVWA5mwjFs1MqiAJ87IS7RQp"
        + "w12jJL4HcD5PkcxFehLUcYtWn5XYlsW2QEKrgzKzjQ"

    /// Google's `https://www.googleapis.com/oauth2/v3/certs`: two RSA keys, members in Google's order.
    static let google = """
        {
          "keys": [
            {
              "e": "AQAB",
              "n": "\(googleModulus1)",
              "alg": "RS256",
              "kty": "RSA",
              "use": "sig",
              "kid": "a50f6e70ef4b548a5fd9142eecd1fb8f54dce9ee"
            },
            {
              "kid": "07b80a365428525f8bf7cd0846d74a8ee4ef3625",
              "n": "\(googleModulus2)",
              "kty": "RSA",
              "alg": "RS256",
              "e": "AQAB",
              "use": "sig"
            }
          ]
        }
        """

    /// Apple's `https://appleid.apple.com/auth/keys`: RSA keys with `kid`, `use` and `alg`.
    static let apple = """
        {"keys":[{"kty":"RSA","kid":"Sf2lFqwkpX","use":"sig","alg":"RS256","n":"\(appleModulus)","e":"AQAB"}]}
        """
}
